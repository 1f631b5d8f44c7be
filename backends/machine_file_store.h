// backends/machine_file_store.h
//
// The machine ids of the CosId proxy's distributor (include/sekka/machines.h) in one file of
// the data dir, `<data>/machines`, rewritten durably on every change (state_file.h's
// WriteFileDurably): a crash keeps the last change answered, or the one before it.
//
// Thread-safety: MachineRegistry calls it under its own lock.

#ifndef SEKKA_BACKENDS_MACHINE_FILE_STORE_H_
#define SEKKA_BACKENDS_MACHINE_FILE_STORE_H_

#include <memory>
#include <string>

#include "sekka/machines.h"

namespace sekka {

// The store at `path` (created on the first change).
std::unique_ptr<MachineStore> NewFileMachineStore(std::string path);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_MACHINE_FILE_STORE_H_
