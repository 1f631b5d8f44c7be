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

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sekka {

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

}  // namespace sekka

#endif  // SEKKA_BACKENDS_COORDINATOR_SESSIONS_H_
