// backends/redis_worker_lease.h
//
// Worker-id leases on Redis. Keys, all in one cluster slot by the hash tag {<cluster>}:
//   sekka:{c}:session:<s>        this process's session: its identity, with a TTL (the lease)
//                                that KeepAlive renews on Redis's own clock
//   sekka:{c}:owner:<dc>:<id>    the holder: a hash of identity, session and version
//   sekka:{c}:owners:<dc>        the set of ids that have an owner record
//   sekka:{c}:hwm:<dc>:<id>      the high-water mark in ms, kept forever
//   sekka:{c}:version            the counter that versions owner records
//   sekka:{c}:layout             the layout the cluster serves
//   sekka:{c}:database           in database 0: the database the cluster's keys live in, bound by
//                                its first server (another database would be a second id space
//                                under one name: refused)
// An id is held while its owner record names a session whose key lives; the record also keeps
// the claim's settle, the holder's TTL, and whether its holder released it (Close, once its own
// settle had passed: then the next claim owes none). Every step is one
// script, so each is atomic on the one Redis: Claim takes the id only if it is still as listed
// (free, or at the version listed) and reads its hwm (promise 1 of include/sekka/coordinator.h);
// StoreHwm raises the hwm only while the owner record names this session and the session lives
// (promise 2). Only the owner's session renews or ends it.
//
// What this rests on (docs/operations.md, "Redis: what is promised"): Redis keeps every write it
// acknowledged. With appendonly yes and appendfsync always on one Redis it does; a failover to a
// replica that lagged can lose a claim or an hwm, and sekka does not promise unique ids across
// one. Unless the URI says durability=any, each connection checks both settings first; unless
// it says eviction=any, that maxmemory-policy evicts only keys with a TTL (sessions).
//
// Redis expires a session by its wall clock, which can step: an id can be freed before a TTL
// has passed since its holder's last renewal. The hwm fence does not care; a claim that took an
// id from a session that did not end by Close reports settle() = the larger TTL of the two, for
// holders that rely on the TTL alone (strict leaders).

#ifndef SEKKA_BACKENDS_REDIS_WORKER_LEASE_H_
#define SEKKA_BACKENDS_REDIS_WORKER_LEASE_H_

#include <memory>
#include <string_view>

#include "backends/coordinator_access.h"
#include "sekka/coordinator.h"

namespace sekka {

// `uri`: redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss:// (parameters tls_ca_file,
// tls_cert_file, tls_key_file, durability); a user and password in `access` apply when the URI
// has none, and so do its TLS files. `cluster` as ValidateClusterName allows. Errors:
// kInvalidArgument naming the setting. Connects lazily (no call is made here).
Result<std::unique_ptr<Coordinator>> NewRedisCoordinator(std::string_view uri,
                                                         std::string_view cluster,
                                                         const WorkerLeaseOptions& options,
                                                         const CoordinatorAccess& access = {});

}  // namespace sekka

#endif  // SEKKA_BACKENDS_REDIS_WORKER_LEASE_H_
