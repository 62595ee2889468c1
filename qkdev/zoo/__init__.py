"""The model zoo of models/zoo: Fashion-MNIST data with the fixed splits, the architectures,
training (train_all), onnxruntime evaluation and QAT fine-tuning."""
