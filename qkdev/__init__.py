"""quantkit's development scripts (not part of the quantkit package): the model zoo (training,
data, evaluation), the report tables and the model exports. Run from the repository root as
`.venv/bin/python -m qkdev.<module>` (e.g. `-m qkdev.zoo.train_all`, `-m qkdev.zoo_table`);
tests and benches import them as `from qkdev.zoo import data`.
"""
