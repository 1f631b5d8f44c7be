#!/usr/bin/env bash
# Installs what sekka needs (scripts/setup.sh) and builds the Release tree in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A new tree is a Ninja one (a tree made before keeps its generator).
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j2
