// StrictLeader: one tag's leadership; the argument is at the top of include/sekka/strict.h.

#include "sekka/strict.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "sekka/segment.h"

namespace sekka {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

}  // namespace

Status ValidateStrictTag(std::string_view tag) {
  const bool ok = !tag.empty() && tag.size() <= 40 && tag != "." && tag != ".." &&
                  std::all_of(tag.begin(), tag.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
                  });
  if (ok) return Status::Ok();
  // "." and ".." name directories (a server alone keeps a tag's bound in <data.dir>/strict/<tag>).
  return InvalidArgument(fmt::format(
      "strict tag \"{}\" is not valid: allowed 1 to 40 characters of A-Z a-z 0-9 _ . -, not . "
      "or ..",
      ShownTag(tag)));  // whole up to 60 characters: a cut one read as valid
}

StrictLeader::StrictLeader(std::string tag, std::unique_ptr<WorkerLease> lease, Clock& clock,
                           StrictOptions options)
    : tag_(std::move(tag)), lease_(std::move(lease)), clock_(clock), options_(options) {}

StrictLeader::~StrictLeader() = default;

Status StrictLeader::Lead() {
  std::lock_guard lock(mu_);
  if (leading_ && ValidLocked()) return Status::Ok();
  std::lock_guard lease_lock(lease_mu_);
  SEKKA_ASSIGN_OR_RETURN(auto grant, lease_->Acquire());
  // The lease is valid from before a renewal was sent (step 2 of the argument). Acquire alone is
  // not one: it may claim with a session opened by an earlier, failed call, whose TTL has been
  // running since; the renewal makes the coordinator count the TTL again from its arrival.
  const std::int64_t sent = clock_.MonotonicMillis();
  if (Status renewed = lease_->Renew(); !renewed.ok()) return renewed;
  valid_until_ = sent + Validity();
  // An earlier leader that did not resign may answer until the TTL after its last renewal
  // reached the coordinator, which came before this claim; where the coordinator cannot promise
  // to have waited that long (Redis: its wall clock), this leader waits it out on its own.
  serve_from_ = sent + grant.settle.count();
  // 1. Above every id an earlier leader served: they are all at or below the stored bound.
  const std::int64_t stored = std::max<std::int64_t>(grant.hwm_millis, 0);
  if (stored == kMax) return Exhausted(fmt::format("strict tag {} is exhausted", tag_));
  bound_ = stored;
  next_ = options_.planted_bug_start_at_bound ? std::max<std::int64_t>(stored, 1) : stored + 1;
  leading_ = true;
  // 2. A window ahead, before any id is served.
  return RaiseLocked(next_);
}

Result<std::int64_t> StrictLeader::Next(std::int64_t n) {
  if (n < 1 || n > options_.window) {
    return InvalidArgument(
        fmt::format("count {} is not valid for strict ids: allowed 1 to {}", n, options_.window));
  }
  std::lock_guard lock(mu_);
  // 1. Only while leading, and the lease known valid now (after the request arrived).
  if (!leading_) return LeaseLost(fmt::format("this server does not lead strict tag {}", tag_));
  if (!ValidLocked()) {
    return LeaseLost(fmt::format(
        "this server's lease on strict tag {} is not known valid now (last renewed {} ms before "
        "its TTL ended)",
        tag_, clock_.MonotonicMillis() - valid_until_));
  }
  if (const std::int64_t wait = serve_from_ - clock_.MonotonicMillis(); wait > 0) {
    return Unavailable(fmt::format(
        "strict tag {}: this server took the lead from a leader that did not resign, and "
        "answers once its lease has surely ended, in {} ms",
        tag_, wait));
  }
  // 2. Within int64.
  if (next_ > kMax - (n - 1)) {
    return Exhausted(fmt::format("strict tag {} is exhausted: next id {}", tag_, next_));
  }
  // 3. At or below a stored bound: raised first when the run would pass it.
  const std::int64_t last = next_ + (n - 1);
  if (last > bound_) {
    std::lock_guard lease_lock(lease_mu_);
    SEKKA_RETURN_IF_ERROR(RaiseLocked(last));
  }
  // 4. Served: the next request, here or at a later leader, gets larger ids.
  const std::int64_t first = next_;
  next_ = last + 1;
  return first;
}

Status StrictLeader::Tick() {
  {
    std::lock_guard lock(mu_);
    if (!leading_) return LeaseLost(fmt::format("this server does not lead strict tag {}", tag_));
  }
  // The renewal runs without mu_, so that Next waits for it only when it must raise the bound.
  const std::int64_t sent = clock_.MonotonicMillis();
  Status renewed;
  {
    std::lock_guard lease_lock(lease_mu_);
    renewed = lease_->Renew();
  }
  std::lock_guard lock(mu_);
  if (!renewed.ok()) {
    if (renewed.error().code == ErrorCode::kLeaseLost) leading_ = false;
    return renewed;
  }
  if (!leading_) return LeaseLost(fmt::format("this server does not lead strict tag {}", tag_));
  valid_until_ = std::max(valid_until_, sent + Validity());
  if (bound_ - next_ + 1 >= options_.window / 2) return Status::Ok();
  std::lock_guard lease_lock(lease_mu_);
  return RaiseLocked(next_);
}

void StrictLeader::Resign() {
  std::lock_guard lock(mu_);
  std::lock_guard lease_lock(lease_mu_);
  leading_ = false;
  (void)lease_->Release();  // a failed release ends at the TTL
}

bool StrictLeader::leading() const {
  std::lock_guard lock(mu_);
  return leading_;
}

bool StrictLeader::Ready(std::int64_t n) {
  // Never waits: a caller that would (a raise or a renewal holds mu_) is not ready.
  std::unique_lock lock(mu_, std::try_to_lock);
  return lock.owns_lock() && leading_ && n >= 1 && ValidLocked() &&
         clock_.MonotonicMillis() >= serve_from_ && next_ <= kMax - (n - 1) &&
         next_ + (n - 1) <= bound_;
}

StrictLeader::State StrictLeader::state() const {
  std::lock_guard lock(mu_);
  return {leading_, next_ - 1, bound_, valid_until_};
}

std::int64_t StrictLeader::Validity() const {
  const auto ttl = static_cast<double>(options_.ttl.count());
  return static_cast<std::int64_t>(ttl * (1.0 - options_.margin));
}

bool StrictLeader::ValidLocked() { return clock_.MonotonicMillis() < valid_until_; }

Status StrictLeader::RaiseLocked(std::int64_t needed) {
  const std::int64_t target = needed > kMax - options_.window ? kMax : needed - 1 + options_.window;
  Status s = lease_->StoreHwm(target);
  if (s.ok()) {
    bound_ = std::max(bound_, target);
    return s;
  }
  // Lost: another server leads now. Unavailable: the value may or may not be stored; the bound
  // kept here is the smaller one, which every stored value covers.
  if (s.error().code == ErrorCode::kLeaseLost) leading_ = false;
  return s;
}

}  // namespace sekka
