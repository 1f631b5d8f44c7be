// server/thrift.h
//
// Thrift's binary protocol over the framed transport, as much of it as a server of
// Twitter Snowflake's IDL needs: reading a call (strict or old-style header, an argument struct
// whose fields of any type are read or skipped) and writing a reply or an application exception.
// Pure functions over bytes, no I/O: the connection feeds frames in and sends the replies back.
//
// Thread-safety: pure functions and plain values.

#ifndef SEKKA_SERVER_THRIFT_H_
#define SEKKA_SERVER_THRIFT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace sekka::thrift {

struct Limits {
  std::size_t max_frame = 64 * 1024;  // a frame's payload, in bytes
  int max_depth = 16;                 // nesting of structs, lists, sets and maps being skipped
};

enum class MessageType : std::int8_t { kCall = 1, kReply = 2, kException = 3, kOneway = 4 };

// TApplicationException's types (the ones sekka sends).
enum class ExceptionType : std::int32_t {
  kUnknown = 0,
  kUnknownMethod = 1,
  kInvalidMessageType = 2,
  kInternalError = 6,
  kProtocolError = 7,
};

struct Call {
  std::string name;
  std::int32_t seqid = 0;
  MessageType type = MessageType::kCall;
  std::map<std::int16_t, std::string> strings;  // the argument struct's string fields, by id
};

struct ParseOutcome {
  enum class Kind {
    kNeedMore,    // no complete frame yet
    kCall,        // `call` holds one; `consumed` bytes are its frame
    kBadMessage,  // a complete frame that is not a valid message; `consumed` skips it
    kBadFrame,    // a frame length that is not 1 to max_frame: the stream cannot go on
  };
  Kind kind = Kind::kNeedMore;
  std::size_t consumed = 0;
  Call call;
  std::string error;  // kBadMessage, kBadFrame: for people, one line
};

// Parses one frame from the front of `data`.
ParseOutcome ParseFrame(std::string_view data, const Limits& limits);

// Appends a framed reply whose result struct holds field 0 (success) as an i64.
void AppendI64Reply(std::string& out, std::string_view name, std::int32_t seqid,
                    std::int64_t value);
// Appends a framed TApplicationException {1: message, 2: type}.
void AppendException(std::string& out, std::string_view name, std::int32_t seqid,
                     ExceptionType type, std::string_view message);

}  // namespace sekka::thrift

#endif  // SEKKA_SERVER_THRIFT_H_
