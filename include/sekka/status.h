// include/sekka/status.h
//
// Error values for sekka's public API. Nothing in sekka throws across the API: a call that can
// fail returns a Status (no value) or a Result<T> (a value or an Error). Code branches on
// Error::code; people read Error::message, which is one line naming what was wrong and what is
// allowed.
//
// Thread-safety: these are plain values.

#ifndef SEKKA_STATUS_H_
#define SEKKA_STATUS_H_

#include <cassert>
#include <new>
#include <string>
#include <string_view>
#include <utility>

namespace sekka {

// The closed list of failure kinds. Each has a fixed wire name (see ErrorCodeName).
enum class ErrorCode {
  kInvalidArgument,      // bad input: a flag, a layout field, an id's text
  kNotFound,             // an unknown name: a preset, a tag, a path
  kUnavailable,          // a dependency cannot answer now; retrying later may work
  kClockMovedBackwards,  // the wall clock is behind time already used
  kExhausted,            // a finite space ran out: a layout's time field, worker ids
  kLeaseLost,            // this process no longer holds its worker id
  kInternal,             // a bug or an unexpected system failure
  kAlreadyExists,        // a name that is taken: creating a tag that exists
  kUnauthenticated,      // a missing or wrong token
  kCancelled,            // the caller stopped it: a call on a closed client
};

// The snake_case name of `code` as it appears on the wire ("invalid_argument", ...).
std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

// Shorthands for building errors.
inline Error InvalidArgument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}
inline Error NotFound(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
inline Error Unavailable(std::string message) {
  return {ErrorCode::kUnavailable, std::move(message)};
}
inline Error Exhausted(std::string message) { return {ErrorCode::kExhausted, std::move(message)}; }
inline Error LeaseLost(std::string message) { return {ErrorCode::kLeaseLost, std::move(message)}; }
inline Error Internal(std::string message) { return {ErrorCode::kInternal, std::move(message)}; }
inline Error Unauthenticated(std::string message) {
  return {ErrorCode::kUnauthenticated, std::move(message)};
}
inline Error Cancelled(std::string message) { return {ErrorCode::kCancelled, std::move(message)}; }
inline Error AlreadyExists(std::string message) {
  return {ErrorCode::kAlreadyExists, std::move(message)};
}

// A value of type T, or an Error. Implicitly constructible from either, so functions can
// `return value;` or `return InvalidArgument("...");`.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(const T& value) : ok_(true) { new (&value_) T(value); }  // NOLINT: implicit by design
  Result(T&& value) : ok_(true) { new (&value_) T(std::move(value)); }         // NOLINT
  Result(Error error) : ok_(false) { new (&error_) Error(std::move(error)); }  // NOLINT
  Result(const Result& other) : ok_(other.ok_) {
    if (ok_) {
      new (&value_) T(other.value_);
    } else {
      new (&error_) Error(other.error_);
    }
  }
  Result(Result&& other) noexcept : ok_(other.ok_) {
    if (ok_) {
      new (&value_) T(std::move(other.value_));
    } else {
      new (&error_) Error(std::move(other.error_));
    }
  }
  Result& operator=(Result other) noexcept {
    this->~Result();
    new (this) Result(std::move(other));
    return *this;
  }
  ~Result() {
    if (ok_) {
      value_.~T();
    } else {
      error_.~Error();
    }
  }

  bool ok() const { return ok_; }
  // REQUIRES: ok().
  const T& value() const& {
    assert(ok_);
    return value_;
  }
  T& value() & {
    assert(ok_);
    return value_;
  }
  T&& value() && {
    assert(ok_);
    return std::move(value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  // REQUIRES: !ok().
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  bool ok_;
  union {
    T value_;
    Error error_;
  };
};

// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : ok_(false), error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  // REQUIRES: !ok().
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  bool ok_ = true;
  Error error_;
};

}  // namespace sekka

// Passing an error up, in abseil's shape (its RETURN_IF_ERROR and ASSIGN_OR_RETURN):
//
//   SEKKA_RETURN_IF_ERROR(Check(x));           // a Status or a Result: its error is returned
//   SEKKA_ASSIGN_OR_RETURN(auto rows, Read());  // a Result<T>: its value into `rows`, or its
//                                               // error returned
//
// The enclosing function returns a Status or a Result<U> (either takes an Error). The left
// side of SEKKA_ASSIGN_OR_RETURN is a declaration or an assignable name, without a comma
// outside parentheses (write `auto` for a type with one).
#define SEKKA_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    auto&& sekka_status_ = (expr);                                    \
    if (!sekka_status_.ok()) return std::move(sekka_status_).error(); \
  } while (false)

#define SEKKA_ASSIGN_OR_RETURN(lhs, expr) \
  SEKKA_ASSIGN_OR_RETURN_(SEKKA_STATUS_CONCAT_(sekka_result_, __LINE__), lhs, expr)
#define SEKKA_ASSIGN_OR_RETURN_(result, lhs, expr)    \
  auto result = (expr);                               \
  if (!result.ok()) return std::move(result).error(); \
  lhs = *std::move(result)
#define SEKKA_STATUS_CONCAT_(a, b) SEKKA_STATUS_CONCAT2_(a, b)
#define SEKKA_STATUS_CONCAT2_(a, b) a##b

#endif  // SEKKA_STATUS_H_
