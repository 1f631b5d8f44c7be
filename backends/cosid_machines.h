// backends/cosid_machines.h
//
// CosId's own machine distributors in place (machines.store): the machine ids CosId instances
// take with CosId's Redis or JDBC distributor, read and written by sekka's MachineRegistry as
// CosId keeps them, so that instances still on CosId's distributor and instances pointed at
// sekka's /machines never hold one machine id at once.
//   Redis  cosid:{<ns>}:itc_idx (hash instanceId -> "machineId|lastStamp"), cosid:{<ns>}:revert
//          (hash machineId -> lastStamp of an id given back), cosid:{<ns>}:adder (the last id
//          handed out; ids come from it in order)
//   JDBC   the table cosid_machine (name "<ns>.<machine id, zero-padded>", namespace,
//          machine_id, last_timestamp, instance_id, distribute_time, revert_time), on MySQL or
//          MariaDB
// Each change is one atomic step that compares what it read: a Lua script that rereads the keys,
// or one statement batch ending in its COMMIT whose writes are conditional on the rows as read
// (an UPDATE that must change its row, an INSERT of a name that must be free); a change of a
// CosId instance in between makes the registry read again. No lock of sekka's outlives a batch.
// What CosId keeps no field for lives in sekka's notes beside its keys or rows (cosid:{<ns>}:sekka,
// table sekka_cosid_machines): a holder's own guard duration, `stable`, who lost an id. A
// holding CosId's distributor made has no note: it is judged by the asker's guard duration, as
// CosId judges it. An id CosId counts as handed out (up to the adder, or the largest machine_id)
// that no key or row holds is never handed out again: sekka cannot tell when its holder stopped.
// Data CosId's code would not write (a machine id held twice, a state without '|') fails the
// namespace's calls, naming it.
//
// Thread-safety: MachineRegistry calls them under its own lock.

#ifndef SEKKA_BACKENDS_COSID_MACHINES_H_
#define SEKKA_BACKENDS_COSID_MACHINES_H_

#include <memory>
#include <string_view>

#include "sekka/machines.h"

namespace sekka {

// `uri`: redis://[USER:PASSWORD@]HOST[:PORT][/DB]?schema=cosid (rediss:// and the Redis
// parameters as for segment.store), or mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE?schema=cosid
// (mariadb:// alike). Errors: kInvalidArgument naming machines.store and what is allowed.
// Connects lazily.
Result<std::unique_ptr<MachineStore>> OpenCosIdMachineStore(std::string_view uri);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_COSID_MACHINES_H_
