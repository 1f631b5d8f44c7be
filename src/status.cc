#include "sekka/status.h"

namespace sekka {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kClockMovedBackwards:
      return "clock_moved_backwards";
    case ErrorCode::kExhausted:
      return "exhausted";
    case ErrorCode::kLeaseLost:
      return "lease_lost";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kCancelled:
      return "cancelled";
  }
  return "internal";
}

}  // namespace sekka
