#!/usr/bin/env bash
# Installs every Debian package sekka needs to build, test and benchmark.
# Idempotent: when everything is already installed it prints nothing and takes about a second.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config git clang-format
  # the test suite's builds: Ninja, and mold as the linker (CMakeLists.txt)
  ninja-build mold
  # libraries (each one is justified in docs/design.md)
  libfmt-dev libcli11-dev nlohmann-json3-dev libasio-dev node-llhttp libtomlplusplus-dev
  libsqlite3-dev libpq-dev postgresql libmariadb-dev mariadb-server mariadb-client
  libzookeeper-mt-dev libssl-dev libcurl4-openssl-dev liburing-dev
  # coordinators the worker-id lease tests start (etcd 3.4, ZooKeeper 3.8)
  etcd-server etcd-client zookeeper
  # the TLS tests make their CA and certificates with the openssl command
  openssl
  # tests and benchmarks
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  # sanitizers and fuzzing (clang + its runtimes)
  clang libclang-rt-14-dev
  # end-to-end test and benchmark tools: real clients and peers
  python3 python3-redis python3-pymysql python3-thrift python3-kazoo thrift-compiler curl procps redis-server redis-tools prometheus hyperfine faketime wrk nginx-light time
  # charts in `sekka stats --html` and the /ui page (inlined at build time)
  libjs-chart.js
  # headless Chromium loads those pages in the tests (console errors, charts drawn, screenshots)
  chromium
  # the Debian package (scripts/package.sh): the man page from --help, its checker, and
  # bash-completion to try the completion it installs
  help2man lintian man-db systemd bash-completion
  # the Java client (clients/java): Debian's JDK and JUnit 5's console launcher; Maven and the
  # packaged plugins its pom.xml names, so that `mvn install` runs offline (tests/packages_test.py)
  default-jdk-headless junit5 maven libmaven-compiler-plugin-java libmaven-resources-plugin-java
  libmaven-jar-plugin-java libmaven-install-plugin-java libsurefire-java
  # the Go client (clients/go) and its tests; the client packages, installed as users would:
  # Python's build, venv and wheel, TypeScript's tsc checking the Node client's types
  golang-go python3-build python3-venv python3-wheel python3-setuptools node-typescript
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# Node.js and npm run the npm packages the tests use as independent checkers (tests/js). A
# machine that has node and npm already (some images ship them) keeps its own.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  missing+=(nodejs npm)
fi

# The registry sometimes stalls mid-download (EIDLETIMEOUT): npm's own fetch retries do not
# cover that, so the whole install is tried three times before the setup fails.
npm_ci() {
  local attempt
  for attempt in 1 2 3; do
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error --fetch-retries=4 > /dev/null) &&
      return 0
    echo "setup: npm ci in $1 failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 10))
  done
  return 1
}

# The npm packages, exactly as the committed lock files say (npm ci), when they are not there
# yet or a lock file changed: the independent checkers (tests/js) and the Node client's test
# dependencies, ioredis and node-redis (clients/node).
npm_packages() {
  local dir
  for dir in "$(dirname "$0")/../tests/js" "$(dirname "$0")/../clients/node"; do
    if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
      [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
      npm_ci "$dir"
    fi
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  npm_packages
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages (${missing[*]}); run this script as root" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 -o Acquire::Retries=3)
for i in 1 2 3; do apt-get update -q >/dev/null && break; sleep 5; done
"${APT[@]}" install "${missing[@]}" >/dev/null
npm_packages
