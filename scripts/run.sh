#!/usr/bin/env bash
# The main job: `sekka serve` on its embedded defaults (HTTP on 127.0.0.1:8080, the Redis
# protocol on 127.0.0.1:6380, data in ./sekka-data). Stop it with Ctrl-C or SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh > /dev/null
exec ./build/cli/sekka serve "$@"
