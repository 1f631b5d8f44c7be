// testing/worker_lease_contract.h
//
// The contract every WorkerLease backend passes, in the spirit of CosId's
// MachineIdDistributorSpec. A backend's test instantiates it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Etcd, WorkerLeaseContractTest, ::testing::Values(factory));

#ifndef SEKKA_TESTING_WORKER_LEASE_CONTRACT_H_
#define SEKKA_TESTING_WORKER_LEASE_CONTRACT_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "sekka/coordinator.h"

namespace sekka {

struct LeaseFactory {
  std::string name;
  // A fresh namespace at the coordinator for one test case (a cluster name, a registry).
  std::function<std::string()> fresh;
  // A new lease client in namespace `where`.
  std::function<std::unique_ptr<WorkerLease>(const std::string& where,
                                             const WorkerLeaseOptions& options)>
      open;
  // Acquires an id as a holder that then dies without releasing it (a killed process), and
  // returns the id it held.
  std::function<Result<std::int64_t>(const std::string& where, const WorkerLeaseOptions& options)>
      kill_holder;
  // A session of the coordinator behind `open` (include/sekka/coordinator.h), for the cases on
  // the narrow interface itself; null for the lock-file sources, which have none.
  std::function<std::unique_ptr<Coordinator>(const std::string& where,
                                             const WorkerLeaseOptions& options)>
      open_coordinator;
  // A dead holder's id is free at once (a lock file the kernel drops), not after the TTL.
  bool frees_at_death = false;
  // A holder with the same identity takes over a live one's id (a coordinator, where the "live"
  // one is this slot's earlier run whose lease has not expired yet); a lock file cannot be.
  bool same_identity_takes_over = true;
  friend void PrintTo(const LeaseFactory& f, std::ostream* os) { *os << f.name; }
};

// The memory backend's factory (for the core's own tests).
LeaseFactory MemoryLeaseFactory();

class WorkerLeaseContractTest : public ::testing::TestWithParam<LeaseFactory> {};

}  // namespace sekka

#endif  // SEKKA_TESTING_WORKER_LEASE_CONTRACT_H_
