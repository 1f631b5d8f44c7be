#!/usr/bin/env bash
# The Debian package, checked as an operator would use it (issue 15; scripts/test.sh runs this
# as root on the CI machine): build it, lintian (no errors), install it with dpkg -i, run the
# installed binary, find the man page, print the configuration from the conffile, verify the
# systemd unit, then remove and purge it and check that nothing is left.
set -euo pipefail
# A check that fails says which (most are silent tests and greps).
trap 'echo "package test: failed at scripts/package_test.sh line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "package test: needs root (dpkg -i); skipped" >&2
  exit 0
fi
debs=$(bash scripts/package.sh)
dev=$(head -n 1 <<< "$debs")
deb=$(tail -n 1 <<< "$debs")
echo "packages: $deb $dev"
# lintian: errors fail; each warning left would need a reason here (there are none now).
report=$(mktemp)
if ! lintian --tag-display-limit 0 --fail-on error "$deb" "$dev" > "$report" 2>&1; then
  cat "$report"
  rm -f "$report"
  echo "package test: lintian found errors" >&2
  exit 1
fi
grep -v 'root privileges' "$report" || true
rm -f "$report"
# A root run before the package (`sekka gen` as root) leaves a lock dir and a lock file that are
# root's: the packaged service must start all the same.
if [ ! -e /var/lib/sekka ]; then
  install -d -m 0750 /var/lib/sekka /var/lib/sekka/workers
  (umask 027 && : > /var/lib/sekka/workers/0-0.lock)
fi
dpkg -i "$deb" > /dev/null
trap 'dpkg -P sekka > /dev/null 2>&1 || true' EXIT
test "$(/usr/bin/sekka --version)" = "$(sed -n 's/^project(sekka VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
man -w sekka > /dev/null
# The page holds every subcommand's help and every configuration key, not only the top help.
page=$(zcat "$(man -w sekka)")
grep -q '^\.SS "sekka serve"' <<< "$page"
grep -q '^\.SH CONFIGURATION' <<< "$page"
grep -q '^tls_ca_file = ' <<< "$page"
# The configuration may hold secrets; the lock dir is shared by group only (issue 24, 6 and 7).
test "$(stat -c %a:%U:%G /etc/sekka/sekka.toml)" = 640:root:sekka
test "$(stat -c %a:%U:%G /var/lib/sekka/workers)" = 2770:sekka:sekka
config=$(/usr/bin/sekka serve --config /etc/sekka/sekka.toml --print-config)
grep -q '^dir = "/var/lib/sekka"' <<< "$config"
grep -q '^http_listen = "127.0.0.1:8080"' <<< "$config"   # loopback unless configured
grep -q '^resp_listen = "127.0.0.1:6380"' <<< "$config"
systemd-analyze verify /lib/systemd/system/sekka.service
# Tab completion as installed: subcommands, a subcommand's flags from its --help, layouts.
complete_words() {  # the words typed so far (the last one being completed) -> COMPREPLY
  bash -c 'source /usr/share/bash-completion/bash_completion
    source /usr/share/bash-completion/completions/sekka
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _sekka sekka "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
test "$(complete_words sekka se | sort)" = "$(printf 'segment\nserve')"
complete_words sekka serve --pri | grep -qx -- --print-config
complete_words sekka gen --layout twi | grep -qx twitter
# The hardening, scored offline (no systemd as PID 1 needed); the unit's comment says why each
# remaining item is left.
systemd-analyze security --offline=true --threshold=15 /lib/systemd/system/sekka.service > /dev/null
# The service as the unit runs it, without systemd: user sekka, the installed configuration, in
# the state dir systemd's StateDirectory= would make. Ports are the kernel's pick here.
install -d -o sekka -g sekka -m 0750 /var/lib/sekka
out=$(mktemp)
(cd /var/lib/sekka && SEKKA_SERVER_HTTP_LISTEN=127.0.0.1:0 SEKKA_SERVER_RESP_LISTEN=127.0.0.1:0 \
  exec setpriv --reuid=sekka --regid=sekka --init-groups /usr/bin/sekka serve --config /etc/sekka/sekka.toml > "$out" 2>&1) &
pid=$!
for _ in $(seq 100); do grep -q 'HTTP on' "$out" && break; sleep 0.1; done
http=$(sed -n 's|.*HTTP on http://\([0-9.:]*\),.*|\1|p' "$out")
curl -sf "http://$http/v1/id" | grep -q '"id":"[0-9]*"' || { cat "$out"; kill "$pid"; exit 1; }
kill -TERM "$pid"
wait "$pid" || { echo "package test: the packaged server did not stop cleanly" >&2; cat "$out"; exit 1; }
rm -f "$out"
# All its state is the user's (but the lock file root made before the package).
test -z "$(find /var/lib/sekka -mindepth 1 ! -user sekka ! -path /var/lib/sekka/workers/0-0.lock)"
test -n "$(find /var/lib/sekka -mindepth 1)"
getent passwd sekka > /dev/null
dpkg -r sekka > /dev/null
test ! -e /usr/bin/sekka
test -e /etc/sekka/sekka.toml   # a conffile stays until purge
dpkg -P sekka > /dev/null
test ! -e /etc/sekka && test ! -e /var/lib/sekka
! getent passwd sekka > /dev/null
# The library, as a C++ project on this machine uses it: find_package(sekka) from /usr, the
# client linked and run (it refuses a bad option before any network).
dpkg -i "$dev" > /dev/null
trap 'dpkg -P sekka-dev > /dev/null 2>&1 || true' EXIT
project=$(mktemp -d)
cat > "$project/CMakeLists.txt" << 'EOF'
cmake_minimum_required(VERSION 3.25)
project(app CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(sekka 0.1 REQUIRED)
add_executable(app app.cc)
target_link_libraries(app PRIVATE sekka::client)
EOF
cat > "$project/app.cc" << 'EOF'
#include <cstdio>

#include "sekka/client.h"

int main() {
  auto bad = sekka::Client::Create("127.0.0.1:0");
  std::puts(bad.ok() ? "accepted" : bad.error().message.c_str());
  return bad.ok() ? 1 : 0;
}
EOF
cmake -S "$project" -B "$project/build" > /dev/null
cmake --build "$project/build" > /dev/null
"$project/build/app" | grep -q 'is not host:port'
rm -rf "$project"
dpkg -P sekka-dev > /dev/null
test ! -e /usr/include/sekka
trap - EXIT
echo "package test: passed"

