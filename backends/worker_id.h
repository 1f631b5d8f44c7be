// backends/worker_id.h
//
// Worker ids on one machine (docs/contract.md section 8): `static` (from the configuration),
// `hostname` (the trailing number of the host name, as a Kubernetes StatefulSet gives) and `local`
// (the lowest free id of the host, preferring the one this identity held before). Every source
// holds an exclusive lock file `<lock_dir>/<dc>-<worker>.lock` for as long as the process runs.
// The lock dir is one per host (worker.lock_dir, default /var/lib/sekka/workers), whatever the
// data dir, user or command (`serve`, `gen`), so no two processes of a host can ever share a
// worker id; the kernel drops the lock when a process dies.
//
// Thread-safety: a WorkerIdClaim is owned by one thread at a time.

#ifndef SEKKA_BACKENDS_WORKER_ID_H_
#define SEKKA_BACKENDS_WORKER_ID_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

struct WorkerIdRequest {
  std::string source = "local";  // static | local | hostname
  std::string lock_dir;          // the host's worker lock dir
  std::string identity;          // who claims (for `local`: prefer what it held before)
  std::int64_t worker_id = 0;    // static
  std::int64_t datacenter_id = 0;
  std::string hostname;            // for `hostname`; "" = gethostname()
  std::int64_t preferred = -1;     // for `local`: tried first when free; -1 = none
  std::int64_t worker_count = -1;  // ids 0 .. worker_count - 1; -1 = all the layout has
  // Asked with the lock held, before an id is kept: true keeps it, false gives it back and looks
  // on (for `local`), an error ends the claim. `own` is true for an id this process was told
  // to take or held before (static, hostname, preferred, this identity's), false for one that
  // the search for a free id came upon. Null: every id is kept.
  std::function<Result<bool>(std::int64_t worker, bool own)> accept;
};

// A held worker id. Releases its lock when destroyed.
class WorkerIdClaim {
 public:
  ~WorkerIdClaim();
  std::int64_t datacenter_id() const { return datacenter_id_; }
  std::int64_t worker_id() const { return worker_id_; }
  const std::string& source() const { return source_; }
  // The file stem used for this worker id's files: "<dc>-<worker>".
  std::string Stem() const;
  // OK while the lock file this claim locked is still the one at its path. Errors: kLeaseLost
  // (it was removed or replaced: another process may have locked a new file there).
  Status CheckHeld() const;

 private:
  friend Result<std::unique_ptr<WorkerIdClaim>> ClaimWorkerId(const WorkerIdRequest&,
                                                              const Layout&);
  WorkerIdClaim() = default;
  int fd_ = -1;
  std::int64_t datacenter_id_ = 0;
  std::int64_t worker_id_ = 0;
  std::string source_;
  std::string path_;  // the lock file
};

// Errors: kInvalidArgument (an id that does not fit the layout, a host name without a trailing
// number), kExhausted ("no free worker id"), kUnavailable (a static id held by another process,
// naming its pid), kInternal (the lock dir cannot be used: the message says what to do), and
// what `accept` returns.
Result<std::unique_ptr<WorkerIdClaim>> ClaimWorkerId(const WorkerIdRequest& request,
                                                     const Layout& layout);

// Where the worker ids of the lock-file sources (static, local, hostname) come from, in an id
// space's name (BindLockDir).
inline constexpr std::string_view kHostWorkers = "this host";

// The one-id-space rule of a host lock dir, as CheckClusterLayout is of a cluster. Locks and
// states are keyed by (datacenter, worker), not by the bits an id carries, so ids of two layouts
// whose bits overlap can be equal (`twitter` datacenter 1 = `leaf` worker 32), and a worker id
// locked here can be one a coordinator gave a server. The first process that uses `lock_dir`
// binds it (`<lock_dir>/id-space`: the layout fingerprint and where worker ids come from,
// kHostWorkers or "etcd cluster C"); every later process must be of that id space. Errors:
// kInvalidArgument naming both id spaces and what to do (also for a file that is not an id
// space), kInternal (the lock dir cannot be used: one line saying what to do).
Status BindLockDir(const std::string& lock_dir, std::string_view layout, std::string_view workers);

// Creates the host's lock dir `dir` if missing (0750) and checks that this user can lock and
// write there. Errors: kInternal, naming what to do.
Status UsableLockDir(const std::string& dir);

// Takes an exclusive flock on `path` (created if missing) and writes the holder's pid and
// identity into it (not when `identity` is empty, nor into another user's file, which is
// opened read-only).
// Returns the fd, which holds the lock until closed, or -1 when another process holds it.
// Errors: kInternal.
Result<int> TryLockFile(const std::string& path, const std::string& identity);
// Who holds the flock on `path` now, as the kernel says (/proc/locks): "held by pid 123
// (sekka)", with the holder's record (its identity) when that pid wrote it. For errors: the
// record alone may be stale, as any process that can open the file can flock it.
std::string DescribeLockHolder(const std::string& path);

// True when the file `fd` is open on is the one at `path` (not a link, not removed, not
// replaced).
bool LockFileIsAt(int fd, const std::string& path);

// Writes the holder's pid and identity into the lock file `fd` (of `path`). Errors: kInternal.
Status RecordLockHolder(int fd, const std::string& path, const std::string& identity);

// Errors: kInvalidArgument when `datacenter_id` does not fit the layout's datacenter bits.
Status CheckDatacenterId(const Layout& layout, std::int64_t datacenter_id);

// The trailing decimal number of `hostname` ("sekka-7" -> 7). Errors: kInvalidArgument.
Result<std::int64_t> HostnameOrdinal(const std::string& hostname);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_WORKER_ID_H_
