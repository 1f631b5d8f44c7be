// backends/zookeeper_worker_lease.h
//
// Worker-id leases on ZooKeeper 3.5+, through Debian's C client (libzookeeper-mt, THREADED: its
// own thread keeps the session alive).
//
// Nodes, under /sekka/<cluster>/:
//   workers/<dc>/<id>   ephemeral; data = identity. It goes when the session ends or expires
//                       (the session timeout is the lease TTL).
//   hwm/<dc>/<id>       persistent; data = the high-water mark in ms (decimal)
// A Coordinator (include/sekka/coordinator.h); NewCoordinatedLease makes its WorkerLease. A claim
// is one multi-op: delete the listed owner node (this identity's earlier run), create this
// session's ephemeral node, and write the hwm node back unchanged at the version read just
// before. Every claim writes the hwm node, so a claim by anyone in between fails this one, and
// from then on only this session knows the node's version: StoreHwm is a set at that version
// (a session taken over fails with a bad version, one that expired with the session), and
// Close deletes its owner node only in a multi that checks that version (never a node another
// session made meanwhile).
//
// Coordinators may share one session (backends/coordinator_sessions.h): each then tells its own
// claims by their owner nodes' czxid, renews by checking that node, and at Close deletes only
// the nodes it made (while the hwm node is at the version read with them).
//
// With a user, the client authenticates with ZooKeeper's digest scheme and creates every node
// under /sekka/<cluster> with the creator's ACL: only that user (any process that has its
// password) may read or change them, and a client without it is refused (ZNOAUTH) before it
// takes an id. Nodes created before a user was set keep their open ACL. Debian's C client has
// no TLS.

#ifndef SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_
#define SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_

#include <memory>
#include <string>
#include <string_view>

#include "backends/coordinator_sessions.h"
#include "sekka/coordinator.h"

namespace sekka {

// Leaf's snowflake registry on the same ZooKeeper (worker.leaf_name; issue 40). Leaf's servers
// take their worker id as the sequence number of a persistent sequential node
// /snowflake/<name>/forever/<ip>:<port>-<10 digits> (data {"ip","port","timestamp"}), made once
// per ip:port and kept forever. Beside them, a sekka server registers as `address` the same way,
// and its worker id is its node's sequence number, which ZooKeeper gives no other node: Leaf's
// and sekka's servers never share a worker id. On top of Leaf's scheme, sekka's own claim (the
// ephemeral owner node and the fenced hwm of its cluster) keeps two sekka processes registered as
// one address apart, and every hwm store writes the node's timestamp in the same multi-op.
// Where Leaf's scheme is weaker, sekka refuses rather than follows it: a node a Leaf server
// wrote (its timestamp past what sekka stored for that id) is never taken over, since Leaf keeps
// no liveness; nor a sequence past the layout's worker ids.
struct LeafRegistry {
  std::string name;     // Leaf's leaf.name: [A-Za-z0-9._]; "" = no Leaf registry
  std::string address;  // "IPv4:port" this server registers as, as Leaf's ip:port
};

// Checks a LeafRegistry as worker.leaf_name and worker.leaf_address. Errors: kInvalidArgument.
Status ValidateLeafRegistry(const LeafRegistry& leaf);

// `servers`: "127.0.0.1:2181[,host:port...]"; `cluster` as ValidateClusterName allows;
// `username` and `password` both or neither ("" = no authentication, open ACLs); `leaf` as
// above (its nodes are open to all, as Leaf makes them); `sessions`: shared sessions
// (backends/coordinator_sessions.h; null, or with a Leaf registry: a session of its own).
// Errors: kInvalidArgument. Connects on the first Acquire.
Result<std::unique_ptr<Coordinator>> NewZooKeeperCoordinator(
    std::string_view servers, std::string_view cluster, const WorkerLeaseOptions& options,
    const std::string& username = "", const std::string& password = "",
    const LeafRegistry& leaf = {}, CoordinatorSessions* sessions = nullptr);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ZOOKEEPER_WORKER_LEASE_H_
