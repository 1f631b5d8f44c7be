// The next id of a generator that a test expects to have one: a failure is a test failure, and
// the id is then -1. Shared by the generator's own tests and the restated IdWorkerSpec.

#pragma once

#include <gtest/gtest.h>

#include "sekka/snowflake.h"

namespace sekka {

inline Id Next(Snowflake& s) {
  Result<Id> id = s.NextId();
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  return id.ok() ? *id : -1;
}

}  // namespace sekka
