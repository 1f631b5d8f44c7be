// tests/clockshift.c: a preload shim that steps a process's wall clock, for tests of a peer
// process whose host's clock steps (a Redis that expires keys by it).
//
//   LD_PRELOAD=libsekka_clockshift.so CLOCKSHIFT_FILE=FILE redis-server ...
//
// CLOCK_REALTIME (and its coarse and alarm kinds, gettimeofday, time) run ahead by the whole
// seconds written in FILE ("+30", "-5"; re-read at most every 50 ms; missing or empty: 0). The
// monotonic clocks are left alone, as an NTP step leaves them. It asks the kernel directly
// (syscall) and never calls dlsym or malloc: redis-server's jemalloc reads the clock while it
// starts, and libfaketime, which resolves the real functions with dlsym, recurses there and
// hangs it.

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic long long offset_ns = 0;
static _Atomic long long read_at_ns = -1000000000000LL;

static long long RawNs(clockid_t clock) {
  struct timespec ts = {0, 0};
  syscall(SYS_clock_gettime, clock, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// The offset in ns, from FILE when the last read is 50 ms old.
static long long Offset(void) {
  const long long now = RawNs(CLOCK_MONOTONIC);
  if (now - atomic_load(&read_at_ns) < 50000000LL) return atomic_load(&offset_ns);
  atomic_store(&read_at_ns, now);
  const char* path = getenv("CLOCKSHIFT_FILE");
  if (path == NULL) return 0;
  const int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return atomic_load(&offset_ns);
  char text[32] = {0};
  const long n = syscall(SYS_read, fd, text, sizeof(text) - 1);
  syscall(SYS_close, fd);
  atomic_store(&offset_ns, n > 0 ? strtoll(text, NULL, 10) * 1000000000LL : 0);
  return atomic_load(&offset_ns);
}

static int IsWall(clockid_t clock) {
  return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE ||
         clock == CLOCK_REALTIME_ALARM;
}

int clock_gettime(clockid_t clock, struct timespec* ts) {
  const long rc = syscall(SYS_clock_gettime, clock, ts);
  if (rc != 0 || !IsWall(clock)) return (int)rc;
  const long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + Offset();
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
  return 0;
}

int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;  // glibc declares tv nonnull
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
