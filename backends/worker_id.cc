#include "backends/worker_id.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "backends/state_file.h"
#include "sekka/layout.h"
#include "sekka/worker_lease.h"

namespace sekka {
namespace {

namespace fs = std::filesystem;

std::string LockPath(const std::string& dir, std::int64_t dc, std::int64_t worker) {
  return fmt::format("{}/{}-{}.lock", dir, dc, worker);
}

// Why a lock dir cannot be used, and what to do, on one line.
std::string UserName(uid_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found);
  return found != nullptr ? found->pw_name : std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  ::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found);
  return found != nullptr ? found->gr_name : std::to_string(gid);
}

bool InGroup(gid_t gid) {
  if (::getegid() == gid) return true;
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  const int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  return std::find(groups.begin(), groups.begin() + std::max(n, 0), gid) != groups.end();
}

// The nearest directory above `dir` that exists but this user cannot pass (a parent made 0750 by
// an older sekka, the package's /var/lib/sekka); empty if none.
fs::path BlockingParent(const fs::path& dir) {
  for (fs::path p = dir.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && ::access(p.c_str(), X_OK) != 0) return p;
  }
  return {};
}

// The one command with which root lets this user use `dir`, the host's lock dir: join the group
// that keeps it, or the parent it cannot pass (the package's `sekka`); else give the dir (made if
// missing) and its files to a group of this user, writable, and a root parent passable. Every
// user of the host then shares the one dir.
std::string LockDirFix(const std::string& dir) {
  const fs::path blocking = BlockingParent(dir);
  struct stat st {};
  const bool seen = ::stat(blocking.empty() ? dir.c_str() : blocking.c_str(), &st) == 0;
  if (seen && st.st_gid != 0 && !InGroup(st.st_gid)) {
    return fmt::format("usermod -aG {} {} (then log in again)", GroupName(st.st_gid),
                       UserName(::geteuid()));
  }
  const bool groups_dir = seen && blocking.empty() && st.st_gid != 0;  // this user's group's
  const std::string group = GroupName(groups_dir ? st.st_gid : ::getegid());
  const std::string pass =
      blocking.empty() ? "" : fmt::format("chmod o+x {} && ", blocking.string());
  return fmt::format("{}install -d -m 2770 -g {} {} && chgrp -R {} {}", pass, group, dir, group,
                     dir);
}

Error LockDirError(const std::string& dir, const std::string& why) {
  return Internal(fmt::format(
      "cannot use the worker lock dir {} ({}): every sekka process of this host locks its worker "
      "id there or binds it to its cluster; fix it, or set worker.lock_dir / "
      "SEKKA_WORKER_LOCK_DIR / --lock-dir to a directory every sekka process of this host shares",
      dir, why));
}

// The dir itself cannot be made or written (errno `err`): a user the host's dir is not for is
// told the one command that lets it in.
Error LockDirError(const std::string& dir, int err) {
  if (err != EACCES && err != EPERM) return LockDirError(dir, std::strerror(err));
  return Internal(fmt::format(
      "cannot use the worker lock dir {} ({}): every sekka process of the host shares it; as "
      "root, run: {}",
      dir, std::strerror(err), LockDirFix(dir)));
}

// An id space as BindLockDir names it, and its file's text.
struct IdSpace {
  std::string layout;
  std::string workers;
  std::string Text() const { return fmt::format("layout={}\nworkers={}\n", layout, workers); }
  // As a reader knows it: a preset by its name ("twitter", "layout twitter" with `article`),
  // another layout by its whole fingerprint; then where worker ids come from unless this host.
  std::string ShortName(bool article) const {
    const std::string preset = PresetOfFingerprint(layout);
    return fmt::format("{}{}",
                       preset.empty() ? fmt::format("layout \"{}\"", layout)
                       : article      ? "layout " + preset
                                      : preset,
                       workers == kHostWorkers ? "" : " with worker ids from " + workers);
  }
};

// The id space bound at `path`; nullopt when none is. Errors: kInvalidArgument (not an id-space
// file), as ReadRegularFile.
Result<std::optional<IdSpace>> ReadIdSpace(const std::string& path) {
  SEKKA_ASSIGN_OR_RETURN(auto read, ReadRegularFile(path, 2048));
  if (!read.has_value()) return std::optional<IdSpace>();
  const std::string_view text = *read;
  IdSpace space;
  const std::size_t mid = text.find("\nworkers=");
  if (text.starts_with("layout=") && mid != std::string_view::npos && text.ends_with('\n')) {
    space.layout = text.substr(7, mid - 7);
    space.workers = text.substr(mid + 9, text.size() - mid - 10);
  }
  if (space.layout.empty() || space.workers.empty() || space.Text() != text) {
    return InvalidArgument(fmt::format(
        "{} is not a sekka id-space file (it should say layout=... and workers=...): remove it "
        "once no sekka process runs on this host",
        path));
  }
  return std::optional<IdSpace>(std::move(space));
}

// Creates `path` with `space` unless it exists: a complete temp file is linked there, so the
// file appears whole or not at all. Errors: kInternal.
Status CreateIdSpace(const std::string& path, const IdSpace& space) {
  SEKKA_ASSIGN_OR_RETURN(auto tmp, WriteTempFile(path, space.Text()));
  const bool linked = ::link(tmp.c_str(), path.c_str()) == 0;
  const int saved = errno;
  ::unlink(tmp.c_str());
  if (!linked && saved != EEXIST) {
    return Internal(fmt::format("cannot create {}: {}", path, std::strerror(saved)));
  }
  SyncParentDir(path);
  return Status::Ok();  // ours, or one a process racing this one created
}

// The id space bound at `path`, binding it to `space` when none is. Errors: as ReadIdSpace and
// CreateIdSpace.
Result<IdSpace> BindIdSpace(const std::string& path, const IdSpace& space) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    SEKKA_ASSIGN_OR_RETURN(auto bound, ReadIdSpace(path));
    if (bound.has_value()) return *bound;
    if (Status created = CreateIdSpace(path, space); !created.ok()) return created.error();
  }
  return Internal(fmt::format("cannot bind {}: it is removed again and again", path));
}

// A lock file's holder record ("pid=...\nidentity=...\n"); "" when it cannot be read.
std::string ReadHolder(const std::string& path) {
  Result<std::optional<std::string>> text = ReadRegularFile(path, 512);
  return text.ok() && text->has_value() ? **text : std::string();
}

}  // namespace

Status UsableLockDir(const std::string& dir) {
  // The common case, at every hwm store: the dir is there and this user can write in it.
  if (::access(dir.c_str(), W_OK | X_OK) == 0) return Status::Ok();
  std::error_code ec;
  // The dir, made for it, is 0750 whatever the umask: users of its group (the package's `sekka`)
  // reach and read its files, and no other user can open a lock file to block an id with it. A
  // dir that exists keeps its mode (an administrator's 2770, say).
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) return LockDirError(dir, ec.value());
  // Parents it made are 0755: other users pass them to the dir, which is the one kept (0750).
  for (const fs::path& p : missing) ::chmod(p.c_str(), p == fs::path(dir) ? 0750 : 0755);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return LockDirError(dir, errno);
  return Status::Ok();
}

std::string DescribeLockHolder(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "its holder is gone";
  const std::string inode = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev),
                                        static_cast<unsigned long>(st.st_ino));
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream words(line);
    std::string index, kind, mode, access, pid, file;
    if (!(words >> index >> kind) || kind == "->") continue;  // "->": a waiter, not the holder
    if (!(words >> mode >> access >> pid >> file) || kind != "FLOCK" || file != inode) continue;
    std::string comm;
    std::ifstream(fmt::format("/proc/{}/comm", pid)) >> comm;
    for (char& c : comm) c = c > ' ' && c < 0x7f ? c : '?';  // another process's name: plain
    const std::string record = ReadHolder(path);
    std::string out = fmt::format("held by pid {} ({})", pid, comm.empty() ? "?" : comm);
    if (record.rfind(fmt::format("pid={}\n", pid), 0) == 0) {
      out += "; " + record.substr(record.find('\n') + 1);
      while (!out.empty() && out.back() == '\n') out.pop_back();
      for (char& c : out) c = c == '\n' ? ' ' : c;
    }
    return out;
  }
  return "its holder is not in /proc/locks (another PID namespace?)";
}

Status BindLockDir(const std::string& lock_dir, std::string_view layout, std::string_view workers) {
  if (Status usable = UsableLockDir(lock_dir); !usable.ok()) return usable;
  const std::string path = lock_dir + "/id-space";
  const IdSpace mine{std::string(layout), std::string(workers)};
  SEKKA_ASSIGN_OR_RETURN(auto bound, BindIdSpace(path, mine));
  if (bound.Text() == mine.Text()) return Status::Ok();
  if (bound.layout == mine.layout && bound.workers != kHostWorkers) {
    return InvalidArgument(fmt::format(
        "the worker lock dir {} serves ids whose worker ids come from {}; this process takes its "
        "worker id from {}, which could be one that cluster gave out: ask a server of the cluster "
        "for ids (e.g. curl http://127.0.0.1:8080/v1/ids?count=N), or give this process that "
        "cluster's worker.source",
        lock_dir, bound.workers, mine.workers));
  }
  // One short line (the first hour meets it trying layouts); the reasons and the move are in
  // docs/operations.md.
  return InvalidArgument(fmt::format(
      "the lock dir {} serves {}, not {}: to try it, --lock-dir \"$(mktemp -d)\" (ids to throw "
      "away; docs/operations.md, \"One id space per host\")",
      lock_dir, bound.ShortName(true), mine.ShortName(false)));
}

Result<int> TryLockFile(const std::string& path, const std::string& identity) {
  // O_NOFOLLOW: a symbolic link planted in a shared lock dir must not make this process write
  // through it. A lock file unlinked or replaced between open and flock is tried again: a flock
  // on a file no longer at `path` excludes nobody.
  // O_NONBLOCK: a FIFO planted there must not hang the start (it is refused below).
  constexpr int kFlags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  for (int attempt = 0; attempt < 8; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | kFlags, 0640);
    // Another user's lock file (shared through the dir's group): a read-only descriptor holds a
    // flock as well.
    const bool read_only = fd < 0 && errno == EACCES;
    if (read_only) fd = ::open(path.c_str(), O_RDONLY | kFlags);
    if (fd < 0 && errno == ELOOP) {
      return InvalidArgument(fmt::format(
          "{} is a symbolic link, which sekka never follows in its lock and data dirs: remove it",
          path));
    }
    if (fd < 0) return Internal(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return InvalidArgument(fmt::format("{} is not a regular file: remove it", path));
    }
    // Readable by the dir's group and by no other user, whatever this process's umask (files
    // of older versions were 0644: anyone could flock them).
    if (st.st_uid == ::geteuid() && (st.st_mode & 0777) != 0640) ::fchmod(fd, 0640);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return -1;
    }
    if (!LockFileIsAt(fd, path)) {
      ::close(fd);
      continue;
    }
    if (read_only || identity.empty()) return fd;
    if (Status s = RecordLockHolder(fd, path, identity); !s.ok()) {
      ::close(fd);
      return std::move(s).error();
    }
    return fd;
  }
  return Internal(fmt::format("cannot lock {}: it is replaced again and again", path));
}

bool LockFileIsAt(int fd, const std::string& path) {
  struct stat held {};
  struct stat named {};
  return ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

Status RecordLockHolder(int fd, const std::string& path, const std::string& identity) {
  // The identity (to get the id back after a restart) and the pid (for errors).
  const std::string content = fmt::format("pid={}\nidentity={}\n", ::getpid(), identity);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, content.data(), content.size(), 0) < 0) {
    // Another user's file (opened read-only: EBADF, or EINVAL from ftruncate) keeps its
    // holder's words: only a restart's preference for its old id is lost.
    if (errno == EBADF || errno == EINVAL) return Status::Ok();
    return Internal(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  return Status::Ok();
}

Status CheckDatacenterId(const Layout& layout, std::int64_t datacenter_id) {
  const std::int64_t max_dc = layout.datacenter_ids() - 1;
  if (datacenter_id >= 0 && datacenter_id <= max_dc) return Status::Ok();
  return InvalidArgument(fmt::format(
      "worker.datacenter_id {} does not fit layout {} ({} datacenter bits): allowed 0 to {}",
      datacenter_id, layout.name(), layout.datacenter_bits(), max_dc));
}

WorkerIdClaim::~WorkerIdClaim() {
  if (fd_ >= 0) ::close(fd_);  // drops the flock
}

Status WorkerIdClaim::CheckHeld() const {
  if (fd_ >= 0 && LockFileIsAt(fd_, path_)) return Status::Ok();
  return LeaseLost(fmt::format(
      "the lock file {} was removed or replaced while this process held it: another process may "
      "hold worker id {} now (never delete lock files of running processes)",
      path_, worker_id_));
}

std::string WorkerIdClaim::Stem() const { return fmt::format("{}-{}", datacenter_id_, worker_id_); }

Result<std::int64_t> HostnameOrdinal(const std::string& hostname) {
  std::size_t end = hostname.size();
  const std::size_t dot = hostname.find('.');
  if (dot != std::string::npos) end = dot;  // the first label of an FQDN
  std::size_t begin = end;
  while (begin > 0 && hostname[begin - 1] >= '0' && hostname[begin - 1] <= '9') --begin;
  if (begin == end || end - begin > 9) {
    return InvalidArgument(fmt::format(
        "host name \"{}\" has no trailing number: worker.source hostname needs names like "
        "\"sekka-7\" (as a Kubernetes StatefulSet gives)",
        hostname));
  }
  return std::stoll(hostname.substr(begin, end - begin));
}

namespace {

// Errors: kInvalidArgument when `worker` does not fit the layout's worker bits.
Status CheckWorkerId(const Layout& layout, std::int64_t worker) {
  const std::int64_t layout_max = layout.worker_ids_per_datacenter() - 1;
  if (worker >= 0 && worker <= layout_max) return Status::Ok();
  return InvalidArgument(
      fmt::format("worker id {} does not fit layout {} ({} worker bits): allowed 0 to {}", worker,
                  layout.name(), layout.worker_bits(), layout_max));
}

// Locks `path`, the lock file of `worker`. Returns the fd, or -1 when another process holds it
// and the claim need not have this id (`must`). Errors: kUnavailable (held, and `must`),
// kInvalidArgument (as TryLockFile: a link or not a regular file), kInternal (LockDirError).
Result<int> LockWorkerId(const WorkerIdRequest& request, std::int64_t worker, bool must,
                         const std::string& path) {
  // The holder is recorded only once the id is kept: an id passed over keeps its last
  // holder's identity, which finds it again.
  Result<int> fd = TryLockFile(path, "");
  if (!fd.ok() && fd.error().code == ErrorCode::kInvalidArgument) return fd.error();
  if (!fd.ok()) return LockDirError(request.lock_dir, fd.error().message);
  if (*fd < 0 && must) {
    return Unavailable(fmt::format(
        "worker id {} (datacenter {}) is already held by another process of this host (lock "
        "{}, {}): choose another worker.id",
        worker, request.datacenter_id, path, DescribeLockHolder(path)));
  }
  return *fd;
}

// Whether to keep `worker`, locked at `fd` (of `path`): asks request.accept, and records this
// process as the holder when kept. Errors: accept's, RecordLockHolder's.
Result<bool> KeepWorkerId(const WorkerIdRequest& request, int fd, const std::string& path,
                          std::int64_t worker, bool own) {
  Result<bool> keep = request.accept ? request.accept(worker, own) : Result<bool>(true);
  if (keep.ok() && *keep) {
    if (Status s = RecordLockHolder(fd, path, request.identity); !s.ok()) keep = s.error();
  }
  return keep;
}

// The worker id of source static (the configured one) or hostname (the trailing number of
// request.hostname, else of this host's name). Errors: as HostnameOrdinal.
Result<std::int64_t> ConfiguredWorkerId(const WorkerIdRequest& request) {
  if (request.source != "hostname") return request.worker_id;
  std::string host = request.hostname;
  if (host.empty()) {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    host = buf;
  }
  return HostnameOrdinal(host);
}

// The ids 0..max_worker whose lock file names this identity as its last holder, each mapped
// to true. Ids are taken lowest first, so lock files exist for 0..n-1 only: the scan stops at
// the first id without one.
std::map<std::int64_t, bool> OwnLockFiles(const WorkerIdRequest& request, std::int64_t max_worker) {
  std::error_code ec;
  std::map<std::int64_t, bool> holders;
  const std::string mine = fmt::format("identity={}\n", request.identity);
  for (std::int64_t w = 0; w <= max_worker; ++w) {
    const std::string path = LockPath(request.lock_dir, request.datacenter_id, w);
    if (!fs::exists(path, ec)) break;
    if (ReadHolder(path).find(mine) != std::string::npos) holders[w] = true;
  }
  return holders;
}

}  // namespace

Result<std::unique_ptr<WorkerIdClaim>> ClaimWorkerId(const WorkerIdRequest& request,
                                                     const Layout& layout) {
  const std::int64_t layout_max = layout.worker_ids_per_datacenter() - 1;
  const std::int64_t max_worker =
      request.worker_count > 0 ? std::min(layout_max, request.worker_count - 1) : layout_max;
  SEKKA_RETURN_IF_ERROR(CheckDatacenterId(layout, request.datacenter_id));
  SEKKA_RETURN_IF_ERROR(UsableLockDir(request.lock_dir));
  auto claim = std::unique_ptr<WorkerIdClaim>(new WorkerIdClaim());
  claim->datacenter_id_ = request.datacenter_id;
  claim->source_ = request.source;

  // `must`: an id that this claim is for (static, hostname), so a held one is an error. `own`:
  // see WorkerIdRequest::accept.
  auto take_one = [&](std::int64_t worker, bool must, bool own) -> Result<bool> {
    SEKKA_RETURN_IF_ERROR(CheckWorkerId(layout, worker));
    const std::string path = LockPath(request.lock_dir, request.datacenter_id, worker);
    SEKKA_ASSIGN_OR_RETURN(const int fd, LockWorkerId(request, worker, must, path));
    if (fd < 0) return false;
    claim->fd_ = fd;
    claim->worker_id_ = worker;
    claim->path_ = path;
    Result<bool> keep = KeepWorkerId(request, fd, path, worker, own);
    if (!keep.ok() || !*keep) {
      ::close(claim->fd_);
      claim->fd_ = -1;
    }
    return keep;
  };

  if (request.source == "static" || request.source == "hostname") {
    SEKKA_ASSIGN_OR_RETURN(const std::int64_t worker, ConfiguredWorkerId(request));
    SEKKA_ASSIGN_OR_RETURN(auto taken, take_one(worker, true, true));
    if (!taken) {
      return Internal(fmt::format("worker id {} was refused without a reason", worker));
    }
    return claim;
  }
  if (request.source != "local") {
    return InvalidArgument(
        fmt::format("worker.source \"{}\" is not available here: allowed static, local, hostname",
                    request.source));
  }
  // `local`: the core's order (WorkerIdCandidates): the preferred id, the ids whose lock file
  // names this identity (an earlier run's), then the lowest free ones. A lock file tells who held
  // an id last, not who holds it now: an id found locked, or passed over by `accept`, joins the
  // holders as another's, and the order is asked again. Ids are taken lowest first, so lock
  // files exist for 0..n-1 only: the scan for this identity's stops at the first id without
  // one, and no pass lists the whole worker-id space (2^31 ids for 31 worker bits).
  std::map<std::int64_t, bool> holders = OwnLockFiles(request, max_worker);
  for (;;) {
    const std::vector<std::int64_t> order =
        WorkerIdCandidates(holders, request.preferred, max_worker + 1);
    if (order.empty()) break;
    for (std::int64_t w : order) {
      const bool own = w == request.preferred || holders.contains(w);
      SEKKA_ASSIGN_OR_RETURN(auto taken, take_one(w, false, own));
      if (taken) return claim;
      holders[w] = false;
    }
  }
  return Exhausted(fmt::format(
      "no free worker id: all {} ids of datacenter {} in {} are held or belong to another layout",
      max_worker + 1, request.datacenter_id, request.lock_dir));
}

}  // namespace sekka
