#!/usr/bin/env bash
# Builds the three checking trees one after the other, in the order scripts/test.sh uses them:
#   tsan: ThreadSanitizer, with the CLI for the server's end-to-end tests (build-tsan), first:
#         its tests take longest;
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer (build-asan);
#   fuzz: the libFuzzer targets under clang, ASan and UBSan (build-fuzz).
# After each, it writes its log to DIR/NAME.log and its exit status to DIR/NAME.rc (DIR is the
# first argument, default a new temp dir); it stops at the first that fails.
# scripts/test.sh runs it in the background, in a session of its own, while the Release tests
# run, which leave much of the two cores unused (most of them wait on servers and timeouts).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-$(mktemp -d)}"
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
# The sanitizer trees build at -Og with line tables only (-g1): their reports keep file and line,
# and the builds take about a third of what -O2 -g took (server/server.cc under ASan + UBSan:
# 90 s, now 32 s).
SANITIZER_BUILD=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-Og -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-Og -g1 -DNDEBUG")

# Configures and builds one tree: tree DIR CMAKE_ARGS... (&&: `set -e` does not hold inside a
# function called on the left of `||`).
tree() {
  local dir=$1
  shift
  cmake -S . -B "$dir" "$@" > /dev/null && cmake --build "$dir" -j2
}
tsan() { tree build-tsan "${SANITIZER_BUILD[@]}" -DSEKKA_SANITIZE=thread -DSEKKA_BUILD_CLI=ON; }
asan() { tree build-asan "${SANITIZER_BUILD[@]}" -DSEKKA_SANITIZE=address,undefined; }
# The fuzz tree builds its targets alone (one per corpus directory, as scripts/test.sh runs
# them), at -O1 with line tables: the libraries they do not link (the client) stay unbuilt, and
# the build takes about half of what -O2 -g and everything took.
fuzz() {
  local targets=() seeds
  for seeds in fuzz/corpus/*/; do targets+=("$(basename "$seeds")_fuzz"); done
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DSEKKA_FUZZ=ON -DSEKKA_BUILD_TESTS=OFF -DSEKKA_BUILD_CLI=OFF > /dev/null &&
    cmake --build build-fuzz -j2 --target "${targets[@]}"
}

for name in tsan asan fuzz; do
  rc=0
  "$name" > "$dir/$name.log" 2>&1 || rc=$?
  echo "$rc" > "$dir/$name.rc.new"
  mv "$dir/$name.rc.new" "$dir/$name.rc"  # whole, for the reader that polls for it
  if [ "$rc" -ne 0 ]; then
    echo "sanitizer builds: $name failed (exit $rc); its log: $dir/$name.log" >&2
    exit "$rc"
  fi
done
