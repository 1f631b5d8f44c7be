#include "sekka/random_id.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sekka/codec.h"

namespace sekka {

Status RandomPool::Fill(std::uint8_t* out, std::size_t n) {
  while (n > 0) {
    if (used_ == pool_.size()) {
      if (RAND_bytes(pool_.data(), static_cast<int>(pool_.size())) != 1) {
        return Internal("OpenSSL's RAND_bytes failed");
      }
      used_ = 0;
    }
    const std::size_t take = std::min(n, pool_.size() - used_);
    std::memcpy(out, pool_.data() + used_, take);
    used_ += take;
    out += take;
    n -= take;
  }
  return Status::Ok();
}

Result<std::uint64_t> RandomPool::Next64() {
  std::uint64_t v = 0;
  SEKKA_RETURN_IF_ERROR(Fill(reinterpret_cast<std::uint8_t*>(&v), sizeof v));
  return v;
}

Result<std::unique_ptr<RandomIdGenerator>> RandomIdGenerator::Create(const Layout& layout,
                                                                     Clock& clock) {
  if (!layout.is_random()) {
    return InvalidArgument(fmt::format(
        "layout {} is a snowflake layout: random ids need a random layout (the random preset, "
        "or kind=random,...)",
        layout.name()));
  }
  SEKKA_RETURN_IF_ERROR(CheckEpochNotInFuture(layout, clock.NowMillis()));
  return std::unique_ptr<RandomIdGenerator>(new RandomIdGenerator(layout, clock));
}

Result<std::int64_t> RandomIdGenerator::Tick() const {
  const std::int64_t now = clock_.NowMillis();
  const std::int64_t tick = layout_.MillisToTick(now);
  if (tick < 0) {
    return InvalidArgument(fmt::format("the clock reads {}, before layout {}'s epoch {}",
                                       FormatUtcMillis(now), layout_.name(),
                                       FormatUtcMillis(layout_.epoch_millis())));
  }
  if (tick > layout_.max_tick()) {
    return Exhausted(fmt::format("layout {} exhausted on {}", layout_.name(),
                                 FormatUtcMillis(layout_.end_millis())));
  }
  return tick;
}

Result<Id> RandomIdGenerator::Next() {
  Id id = 0;
  SEKKA_RETURN_IF_ERROR(NextIds(std::span<Id>(&id, 1)));
  return id;
}

Status RandomIdGenerator::NextIds(std::span<Id> out) {
  if (out.empty()) return Status::Ok();
  SEKKA_ASSIGN_OR_RETURN(auto tick, Tick());
  const std::uint64_t time = static_cast<std::uint64_t>(tick) << layout_.time_shift();
  const std::uint64_t mask = (std::uint64_t{1} << layout_.random_bits()) - 1;
  std::lock_guard lock(mu_);
  auto draw = [&](Id& id) -> Status {  // REQUIRES: mu_ held
    SEKKA_ASSIGN_OR_RETURN(auto r, pool_.Next64());
    id = static_cast<Id>(layout_.Spread(time | (r & mask)));
    return Status::Ok();
  };
  if (out.size() == 1) return draw(out[0]);
  // Distinct within the batch: each id goes into an open-addressing set (twice the batch's
  // size, linear probing) and is drawn again while it is already there. A batch larger than
  // the tick's random space cannot be distinct.
  if (out.size() > mask + 1) {
    return InvalidArgument(fmt::format(
        "a batch of {} random ids cannot be distinct in {} random bits: allowed at most {}",
        out.size(), layout_.random_bits(), mask + 1));
  }
  int slot_bits = 4;
  while ((std::size_t{1} << slot_bits) < 2 * out.size()) ++slot_bits;
  const std::size_t slots = std::size_t{1} << slot_bits;
  constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // no id is 2^64 - 1
  std::vector<std::uint64_t> table(slots, kEmpty);
  for (Id& id : out) {
    for (;;) {
      if (Status s = draw(id); !s.ok()) return s;
      const auto value = static_cast<std::uint64_t>(id);
      // Fibonacci hashing: the top bits of the product.
      std::size_t at =
          static_cast<std::size_t>((value * 0x9e3779b97f4a7c15ULL) >> (64 - slot_bits));
      while (table[at] != kEmpty && table[at] != value) at = (at + 1) & (slots - 1);
      if (table[at] == kEmpty) {
        table[at] = value;
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace sekka
