#!/usr/bin/env bash
# .venv-peers: the peer tools the benchmarks run side by side with quantkit (ModelOpt), kept apart
# from .venv. Recreated when scripts/requirements-peers.txt changes.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=scripts/requirements-peers.txt
STAMP=.venv-peers/.requirements.sha256
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]]; then exit 0; fi
rm -rf .venv-peers
/usr/bin/python3 -m venv .venv-peers
.venv-peers/bin/pip install --quiet --disable-pip-version-check -r "$REQ"
echo "$want" > "$STAMP"
