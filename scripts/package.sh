#!/usr/bin/env bash
# Builds the Debian packages (CPack, packaging/): build/sekka_<version>_<arch>.deb with the
# binary, the systemd unit, /etc/sekka/sekka.toml, the man page, bash completion and the docs,
# and build/sekka-dev_<version>_<arch>.deb with the C++ library (headers, static libraries,
# find_package(sekka)). Prints the two paths, the server's last.
#   bash scripts/package.sh && apt install ./build/sekka_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Release tree the other scripts build (no second compile); packaging adds only its files.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSEKKA_PACKAGE=ON > /dev/null
cmake --build build -j2 > /dev/null
rm -f build/sekka_*.deb build/sekka-dev_*.deb
(cd build && cpack -G DEB > /dev/null)
ls build/sekka-dev_*.deb build/sekka_*.deb
