#!/usr/bin/env bash
# make demo: runs quantkit on the bundled default model.
set -euo pipefail
BUILD_DIR=${1:-build/dev}
QK=$BUILD_DIR/tools/quantkit/quantkit
"$QK" --version
echo "No model bundled yet: run '$QK --help' for the commands."
