#!/usr/bin/env bash
# The main job on embedded defaults. Until `sekka serve` exists (the server issue), it prints
# five ids and the default layout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh > /dev/null
./build/cli/sekka gen -n 5
./build/cli/sekka layout
