// backends/redis_segment_store.h
//
// A segment store in Redis, shared by many servers. A tag is two keys, in one cluster slot by
// their hash tag: `PREFIX:{TAG}.adder`, a counter holding the last id a range covered, and
// `PREFIX:{TAG}.meta`, a hash of its step, delta and remainder. A range is one INCRBY of the
// counter (in a script that refuses unknown tags and a range past 2^63 - 1): the new value v
// gives [v - step + 1, v + 1). PREFIX is the URI's `schema`: `sekka` (the default) or `cosid`,
// whose keys are CosId's Redis segment distributor's (`cosid:{namespace.name}.adder`, the same
// counter), so that CosId's clients and sekka servers draw from one counter at once.
//
// What sekka promises on Redis (docs/operations.md, "Redis"): ranges of one tag never overlap
// while the counter key survives. Redis acknowledges a write before it reaches a disk or a
// replica, so a Redis that restarts without the write (no AOF with appendfsync always) or a
// failover to a replica that had not received it hands out some ids again. sekka cannot see
// that happen; run Redis with appendonly yes and appendfsync always, and without failover, or
// use a store that commits before it answers (PostgreSQL, MySQL, SQLite).

#ifndef SEKKA_BACKENDS_REDIS_SEGMENT_STORE_H_
#define SEKKA_BACKENDS_REDIS_SEGMENT_STORE_H_

#include <memory>
#include <string>

#include "sekka/segment.h"

namespace sekka {

// `uri` is redis://[USER[:PASSWORD]@]HOST[:PORT][/DB][?schema=sekka|cosid] or rediss:// (TLS:
// `tls_ca_file` (required), `tls_cert_file` and `tls_key_file` parameters). Errors:
// kInvalidArgument (a malformed URI, an unknown parameter, TLS files that cannot be used). An
// unreachable Redis is not an error here: calls return kUnavailable until it answers.
Result<std::unique_ptr<SegmentStore>> OpenRedisSegmentStore(const std::string& uri);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_REDIS_SEGMENT_STORE_H_
