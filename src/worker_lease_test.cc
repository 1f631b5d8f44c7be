// The worker-lease contract on the memory backend.

#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

INSTANTIATE_TEST_SUITE_P(Memory, WorkerLeaseContractTest, ::testing::Values(MemoryLeaseFactory()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sekka
