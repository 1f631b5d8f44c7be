// backends/machine_stores.h
//
// The CosId proxy's machine ids (include/sekka/machines.h) on a server without a coordinator (one
// with a coordinator keeps them there: NewCoordinatorMachineStore): one file of its data dir,
// `<data>/machines`, rewritten durably on every change (state_file.h's WriteFileDurably): a
// crash keeps the last change answered, or the one before it.
//
// Thread-safety: MachineRegistry calls them under its own lock.

#ifndef SEKKA_BACKENDS_MACHINE_STORES_H_
#define SEKKA_BACKENDS_MACHINE_STORES_H_

#include <memory>
#include <string>

#include "sekka/machines.h"

namespace sekka {

// The store at `path` (created on the first change). One process per data dir: it reads the
// file once.
std::unique_ptr<MachineStore> NewFileMachineStore(std::string path);

// The records of the machines file at `path` (none when there is no file). Errors: kInternal
// (unreadable), kInvalidArgument (corrupt, naming the line).
Result<std::vector<MachineRecord>> ReadMachineFile(const std::string& path);

// Adds the records of the machines file at `path` to `store` (a cluster's, or CosId's), then
// renames it `<path>.adopted`: an id the store has no record of is taken as the file has it, and
// so is one the store has given back; one the store holds keeps its holder, with the later of
// the two hwms, and the file's holder, if another, finds it lost (its next guard answers M-03).
// Adopting again changes nothing. No file: nothing to do. Errors: ReadMachineFile's, the
// store's, kInternal (the rename).
Status AdoptMachineFile(const std::string& path, MachineStore& store);
// `store`, adopting the machines file at `path` (AdoptMachineFile) at its first load that can:
// until then each load fails with the reason (kUnavailable), so that a store that is down at
// start fails the machine calls, not the start.
std::unique_ptr<MachineStore> WithAdoptedFile(std::unique_ptr<MachineStore> store,
                                              std::string path);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_MACHINE_STORES_H_
