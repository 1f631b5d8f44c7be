#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script):
#   0. formatting (clang-format --dry-run on every C++ file);
#   1. Release build: the unit tests, the simulation (5,000 seeds from a seed drawn per run),
#      what needs the product's binary (the clients' and packages' suites, the coordinators' and
#      network stores' end-to-end tests, the clock tiers, the hostile clients) and a 30 to 45 s
#      fault campaign per coordinator on a new seed each run (tests/faults, docs/reliability.md;
#      scripts/faults.sh runs the long form) (ctest); the other end-to-end tests run in stage 2
#      (ASAN_COVERS below says why);
#   1b. the Debian package (scripts/package_test.sh: lintian, dpkg -i, checks, purge);
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build: the same tests but the slowest
#      clock-fault tiers and the network stores' and coordinators' end-to-end tests (Release
#      runs them; SANITIZER_SKIP below says why);
#   3. ThreadSanitizer build: the unit tests (the concurrency tests among them) and the server's
#      end-to-end tests (its event loops and background thread), with the same skips; stages 2
#      and 3, and the fuzz targets, run side by side;
#   4. libFuzzer (clang, ASan + UBSan): each fuzz target for a bounded time.
# Every test runs on both I/O paths of the event loops (server.io, issue 45): the Release and
# AddressSanitizer stages on io_uring (the default where the kernel allows it), the
# ThreadSanitizer stage on epoll (SEKKA_SERVER_IO=epoll, which every `sekka serve` a test starts
# inherits); the tests TSan does not run get a second pass on epoll in the Release tree
# (EPOLL_PASS, which has cli_test and ClockFaultTest: ASan runs them on io_uring).
# scripts/test_busy.sh runs this script with two CPU hogs beside it (issue 39).
# Each build has its own tree (build, build-asan, build-tsan, build-fuzz); re-runs are
# incremental. The three checking trees build in the background (scripts/sanitizer_builds.sh,
# in a session of its own: at most half the machine while the tests want it) from the end of
# the Release build on; each stage waits for its tree. That is safe only because every test
# passes on a busy machine (two CPU hogs beside the whole suite, issue 39). FUZZ_SECONDS
# (default 10) bounds each fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS="${FUZZ_SECONDS:-10}"
# In the sanitizer stages, the end-to-end tests of the network stores and coordinators are left
# out: their client code runs under both sanitizers in the contract suites (unit tests against
# the real etcd, ZooKeeper, PostgreSQL, MariaDB and Redis), and the server's coordinated paths
# in strict_test and the simulation; the Release stage runs them all.
SANITIZER_SKIP='segment_test\.(Postgres|Mysql|Redis)SegmentTest|segment_test\.PeerTablesTest'
SANITIZER_SKIP+='|coordinator_test\.(Etcd|EtcdTls|ZooKeeper|ZooKeeperAuth|Redis)Test$'
SANITIZER_SKIP+='|peers_test\.LeafSnowflakeTest'
# 1,000 strict tags on two servers is a scale test: a sanitizer build (5-20x slower, beside the
# other build's tests) cannot renew 500 leases a server in time on etcd, one keepalive and one
# read each over the shared session's one connection. The shared sessions' code runs under both
# sanitizers through the "-shared" contract parameters and the strict tests.
SANITIZER_SKIP+='|strict_test\.(ZooKeeper|Etcd)ManyTagsTest'
# Each stage's heading says when it began (seconds since the start), to see where time goes.
step() { printf '\n=== %s (at %d s)\n' "$*" "$SECONDS"; }
export CMAKE_GENERATOR="${CMAKE_GENERATOR:-Ninja}"
WORK=$(mktemp -d)
BUILDS_PID=
declare -A TEST_PIDS=()  # a stage's name -> its process group, until it is waited for
# Waits (up to 5 s) until background process `pid` leads a process group of its own, so that
# cleanup can stop the group whenever the script ends.
await_group() {
  local pid=$1 tries
  for ((tries = 0; tries < 500; tries++)); do
    [ "$(ps -o pgid= -p "$pid" 2> /dev/null | tr -d ' ')" = "$pid" ] && return 0
    kill -0 "$pid" 2> /dev/null || return 0
    sleep 0.01
  done
}
# Starts a command in the background in a process group of its own (its PID is the group's).
in_own_group() {
  /usr/bin/python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' "$@" &
  await_group "$!"
}
# On any exit: the background builds and test runs (each its own process group, not yet waited
# for) stop, and temp files go. The fixtures a stopped ctest started (PostgreSQL, Redis, etcd,
# ZooKeeper in their own sessions) stay until that tree's next run stops them.
cleanup() {
  local pid
  for pid in $BUILDS_PID "${TEST_PIDS[@]}"; do
    kill -- "-$pid" 2> /dev/null || kill "$pid" 2> /dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
# Waits for a checking tree's background build (asan, tsan or fuzz); shows its log's end, or the
# whole log and stops the suite if it failed.
await_build() {
  local name=$1
  while [ ! -e "$WORK/builds/$name.rc" ] && kill -0 "$BUILDS_PID" 2> /dev/null; do sleep 1; done
  if [ "$(cat "$WORK/builds/$name.rc" 2> /dev/null)" != 0 ]; then
    cat "$WORK/builds/$name.log" 2> /dev/null || true
    echo "test: the $name build failed (its log is above)" >&2
    exit 1
  fi
  printf '%s build done (at %d s):\n' "$name" "$SECONDS"
  tail -n 2 "$WORK/builds/$name.log"
}

step "setup and Release build"
bash scripts/build.sh
mkdir "$WORK/builds"
# The builds run in a session of their own: the kernel's autogroup gives a session's processes
# one share, so the builds take at most half the machine while the tests want it, and all of it
# when they do not. (At SCHED_IDLE in the tests' session they got so little beside the Release
# tests that the ASan tree was built 150 s after them, and the suite took longer.)
setsid bash scripts/sanitizer_builds.sh "$WORK/builds" &
BUILDS_PID=$!
await_group "$BUILDS_PID"

step "formatting: every C++ file as .clang-format says"
if ! git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror 2> "$WORK/format.log"; then
  grep -E 'warning:|error:' "$WORK/format.log" | cut -d: -f1 | sort -u | sed 's/^/  needs clang-format -i: /'
  exit 1
fi

step "Release: unit and simulation tests, what needs the product's binary, fault campaigns"
# The end-to-end tests that the AddressSanitizer stage runs whole leave the Release stage: the
# same test against a binary that also checks every memory access and undefined operation finds
# all that the Release run finds but a difference of speed, and the Release binary stays under
# test where it is the product (the campaigns, the hostile clients, the clients' and packages'
# suites, the coordinators' and network stores' end-to-end tests, the clock tiers, the package).
# The unit tests stay: the lock-free generator and the simulation run at -O3 here.
# server_test.LimitsTest stays too: its resident-memory checks are skipped under the sanitizers
# (their allocators keep freed memory), so only this stage makes them.
ASAN_COVERS='^(cli_test|clients\.cpp|conformance\.cpp|tls_test\..*|stats_test\..*'
ASAN_COVERS+='|server_test\.(HttpTest|AuthTest|RespTest|UniquenessTest|WorkerIdTest|ClockFaultTest'
ASAN_COVERS+='|RestartStateTest|AbuseTest|DiskFullTest|ConfigTest|OpaqueServerTest|TimeOrderedIdTest'
ASAN_COVERS+='|RandomAndSpreadServerTest|MonitoringTest|UiTest|SecretsTest|StatementsTest)'
ASAN_COVERS+='|check_test\..*|thrift_test\..*|segment_test\.SqliteSegmentTest'
ASAN_COVERS+='|peers_test\.(TinyIdTest|TinyIdTokenTest|TinyIdTableTokenTest|CosIdTest|CosIdAuthTest)'
ASAN_COVERS+='|strict_test\..*|entry_points_test\.(HostWorkerIdTest|ReviewFindingsTest)'
ASAN_COVERS+='|coordinator_test\.CoordinatorConfigTest)$'
ctest --test-dir build --output-on-failure -j2 -E "$ASAN_COVERS"

# The tests the ThreadSanitizer stage (epoll) does not run, again on epoll: the 1,000-tag tests
# and the coordinators' clock tiers here, alone (their renewals and their clock steps need the
# machine: beside the sanitizer stages the former missed TTLs, and EtcdClockTest's restart came
# so late that the stepped-back clock had passed the hwm again),
# the rest in the background beside the sanitizer stages (they mostly wait on coordinators,
# stores and TTLs), after the package stage, which may rebuild build/.
EPOLL_ALONE='strict_test\.(ZooKeeper|Etcd)ManyTagsTest|coordinator_test\.(Etcd|ZooKeeper|Redis)ClockTest'
EPOLL_PASS="$EPOLL_ALONE|ThriftClockTest|ClockFaultTest|cli_test|DirectionTest|$SANITIZER_SKIP"
SEKKA_SERVER_IO=epoll ctest --test-dir build --output-on-failure -j2 -R "$EPOLL_ALONE"

step "Debian package: build, lintian, install, check, purge"
bash scripts/package_test.sh

# The two checking trees' tests and the fuzz targets run side by side (each ctest -j2, the fuzz
# targets one at a time): most of the tests' time is spent waiting on servers, coordinators and
# timeouts, and every test passes on a busy machine. Each starts as soon as its tree is built,
# and writes its own log, shown whole when it fails and by its summary when it passes.
step "ThreadSanitizer, AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer, side by side"
epoll_tests() {
  SEKKA_SERVER_IO=epoll ctest --test-dir build --output-on-failure -j2 -R "$EPOLL_PASS" \
    -E "$EPOLL_ALONE"
}
export -f epoll_tests
export EPOLL_PASS EPOLL_ALONE
in_own_group bash -c epoll_tests > "$WORK/epoll-tests.log" 2>&1
TEST_PIDS[epoll]=$!
# ThreadSanitizer: the unit tests and the server end to end, but LimitsTest's stalled-readers
# case (one event loop and 344 MB of UUIDs: nothing for TSan that its other budget cases, on
# several loops, do not show; Release and ASan run it). The clock-fault tests preload
# libfaketime, which the TSan runtime does not allow; they run in the Release and ASan stages
# (DirectionTest too: its descending gen runs at a faked date, and a TSan gen is too slow to
# meet the mirror ticks its own check asks for).
tsan_tests() {
  SEKKA_SERVER_IO=epoll TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j2 \
    -E "ClockFaultTest|EtcdClockTest|ZooKeeperClockTest|RedisClockTest|ThriftClockTest|cli_test|DirectionTest|$SANITIZER_SKIP"
}
# verify_asan_link_order=0: the clock-fault tests preload libfaketime into the ASan binary.
# The coordinators' clock-fault tiers and the descending-gen test run in Release only (they are
# the slowest here, and their code paths run under ASan in the simulation and the unit tests).
asan_tests() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:verify_asan_link_order=0 \
    UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j2 \
    -E "EtcdClockTest|ZooKeeperClockTest|RedisClockTest|DirectionTest|$SANITIZER_SKIP"
}
# libFuzzer (clang, ASan + UBSan): one target per corpus directory (a stale binary of a removed
# target in the tree is skipped), FUZZ_SECONDS each, one at a time. A target that fails prints
# its whole log.
fuzz_tests() {
  local seeds name rc status=0
  for seeds in fuzz/corpus/*/; do
    name=$(basename "$seeds") rc=0
    mkdir "$FUZZ_WORK/$name"
    cp "fuzz/corpus/$name/"* "$FUZZ_WORK/$name"/
    "build-fuzz/fuzz/${name}_fuzz" -max_total_time="$FUZZ_SECONDS" -max_len=256 \
      -print_final_stats=1 "$FUZZ_WORK/$name" > "$FUZZ_WORK/$name.log" 2>&1 || rc=$?
    echo "--- $name (exit $rc)"
    if [ "$rc" -eq 0 ]; then tail -n 3 "$FUZZ_WORK/$name.log"; else cat "$FUZZ_WORK/$name.log"; fi
    [ "$rc" -eq 0 ] || status=1
  done
  return "$status"
}
FUZZ_WORK=$WORK/fuzz
mkdir "$FUZZ_WORK"
export -f tsan_tests asan_tests fuzz_tests
export SANITIZER_SKIP FUZZ_WORK FUZZ_SECONDS
for name in tsan asan fuzz; do  # the order scripts/sanitizer_builds.sh builds them in
  await_build "$name"
  in_own_group bash -c "${name}_tests" > "$WORK/$name-tests.log" 2>&1
  TEST_PIDS[$name]=$!
done
wait "$BUILDS_PID" || true  # done (fuzz.rc is written): reaped, so cleanup leaves its PID be
BUILDS_PID=
failed=0
for name in epoll tsan asan fuzz; do
  if wait "${TEST_PIDS[$name]}"; then
    printf '%s passed (at %d s):\n' "$name" "$SECONDS"
    if [ "$name" = fuzz ]; then
      cat "$WORK/fuzz-tests.log"
    else
      grep -E '^(100% tests passed|Total Test time)' "$WORK/$name-tests.log" || true
    fi
  else
    cat "$WORK/$name-tests.log"
    echo "test: the $name stage failed (its log is above)" >&2
    failed=1
  fi
done
TEST_PIDS=()  # all waited for: their PIDs may be another process's by now
[ "$failed" -eq 0 ] || exit 1

step "all test stages passed"
