#!/usr/bin/env bash
# Installs what sekka needs (scripts/setup.sh) and builds the Release tree in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2
