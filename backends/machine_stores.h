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

// Adds the records of the machines file at `path` to `store` (a cluster's), then renames it
// `<path>.adopted`: an id the store has no record of is taken as the file has it; one it has
// keeps its holder, with the later of the two hwms, and the file's holder, if another, finds it
// lost (its next guard answers M-03). Adopting again changes nothing. No file: nothing to do.
// Errors: ReadMachineFile's, the store's, kInternal (the rename).
Status AdoptMachineFile(const std::string& path, MachineStore& store);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_MACHINE_STORES_H_
