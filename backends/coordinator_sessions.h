// backends/coordinator_sessions.h
//
// Coordinator sessions shared by one process's coordinators (a strict tag's lease, the lookups of
// its leader, the declared tags: server/strict_tags.h). Each coordinator is then a view of the
// session in a namespace of its own: what it claims is held while the shared session lives, its
// Close frees what it claimed (conditioned on its fence, as before) and leaves the session to the
// others, and the session ends once its last coordinator goes. So a process holds one session
// per coordinator and user however many tags it serves (ZooKeeper allows 60 connections per
// address by default). A release that cannot be sent (the connection is lost) is kept and sent
// again by the session's next call; were the session to end meanwhile, what it held is gone with
// it.
//
// Sharing is ZooKeeper's (one client connection) and etcd's (one lease); a Redis session is a key
// in its cluster's hash slot, so each namespace keeps its own.
//
// Thread-safety: Get may be called from any thread.

#ifndef SEKKA_BACKENDS_COORDINATOR_SESSIONS_H_
#define SEKKA_BACKENDS_COORDINATOR_SESSIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sekka/coordinator.h"

namespace sekka {

// True when `h` is the holding a claim made in session `session`, known by its creation
// `creation` (ZooKeeper's czxid, etcd's mod_revision; 0: not known, the claim's answer was
// lost): the test of Coordinator::Mine for a session shared by several coordinators.
inline bool IsClaim(const Holding& h, std::int64_t session, std::int64_t creation) {
  return h.session != 0 && session == h.session && (creation == 0 || creation == h.version);
}

class CoordinatorSessions {
 public:
  // The session shared under `key` (the source's name first: one key, one type), made by `make`
  // when none lives. It lives while a coordinator holds it.
  template <typename Session>
  std::shared_ptr<Session> Get(const std::string& key,
                               const std::function<std::shared_ptr<Session>()>& make) {
    std::lock_guard lock(mu_);
    std::weak_ptr<void>& slot = live_[key];
    if (std::shared_ptr<void> found = slot.lock()) return std::static_pointer_cast<Session>(found);
    std::shared_ptr<Session> made = make();
    slot = made;
    return made;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<void>> live_;  // guarded by mu_
};

// The claims of one shared session, numbered per key (an owner node's path, an owner key): a
// release of an earlier claim of a key is void once a later claim of it may have landed (the
// later one is then the key's to release). Claims and releases run one at a time.
class ClaimLedger {
 public:
  // A claim's step for `key`, sent while the returned lock is held: `claim` gets its number,
  // `previous` the key's last before it.
  std::unique_lock<std::mutex> Begin(const std::string& key, std::uint64_t& claim,
                                     std::uint64_t& previous) {
    std::unique_lock lock(mu_);
    claim = ++made_;
    std::uint64_t& last = last_[key];
    previous = last;
    last = claim;
    return lock;
  }
  // Nothing of `claim` landed: `previous` is the key's last again (unless a later one came).
  void Undo(const std::string& key, std::uint64_t claim, std::uint64_t previous) {
    std::lock_guard lock(mu_);
    if (auto it = last_.find(key); it != last_.end() && it->second == claim) it->second = previous;
  }
  // Held while releases are sent.
  std::unique_lock<std::mutex> Lock() { return std::unique_lock(mu_); }
  // True unless a claim of `key` later than `claim` may have landed. REQUIRES: Lock() held.
  bool Latest(const std::string& key, std::uint64_t claim) const {
    auto it = last_.find(key);
    return it == last_.end() || it->second == claim;
  }

 private:
  std::mutex mu_;
  std::uint64_t made_ = 0;  // guarded by mu_
  // Guarded by mu_: one entry per key ever claimed in the session (a strict tag's is one: at most
  // the tags a server serves and has served).
  std::map<std::string, std::uint64_t> last_;
};

}  // namespace sekka

#endif  // SEKKA_BACKENDS_COORDINATOR_SESSIONS_H_
