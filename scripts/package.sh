#!/usr/bin/env bash
# Builds the Debian package build/sekka_<version>_<arch>.deb (CPack, packaging/): the binary,
# the systemd unit, /etc/sekka/sekka.toml, the man page, bash completion and the docs.
#   bash scripts/package.sh && apt install ./build/sekka_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-package -DCMAKE_BUILD_TYPE=Release -DSEKKA_PACKAGE=ON -DSEKKA_BUILD_TESTS=OFF \
  > /dev/null
cmake --build build-package -j2 > /dev/null
(cd build-package && cpack -G DEB > /dev/null)
mkdir -p build
cp build-package/sekka_*.deb build/
ls build/sekka_*.deb
