// libFuzzer target for the Thrift frame parser (server/thrift.cc): never a crash, never a
// read outside the input, a consumed count inside the input, and a call that survives being
// written back: the reply writer's frame parses as one frame of the length it says.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/thrift.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sekka::thrift;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Limits limits;
  limits.max_frame = 4096;
  std::size_t pos = 0;
  while (pos < in.size()) {
    ParseOutcome o = ParseFrame(in.substr(pos), limits);
    if (o.kind == ParseOutcome::Kind::kNeedMore || o.kind == ParseOutcome::Kind::kBadFrame) break;
    if (o.consumed < 5 || o.consumed > in.size() - pos || o.consumed > limits.max_frame + 4) {
      std::abort();
    }
    if (o.kind == ParseOutcome::Kind::kCall) {
      std::string out;
      AppendI64Reply(out, o.call.name, o.call.seqid, 42);
      AppendException(out, o.call.name, o.call.seqid, ExceptionType::kInternalError, "x");
      Limits big;
      big.max_frame = 1 << 20;
      // Both replies are whole frames; a reply is a message, not a call, but it parses.
      ParseOutcome first = ParseFrame(out, big);
      if (first.kind != ParseOutcome::Kind::kCall || first.call.name != o.call.name ||
          first.call.seqid != o.call.seqid || first.call.type != MessageType::kReply) {
        std::abort();
      }
      ParseOutcome second = ParseFrame(std::string_view(out).substr(first.consumed), big);
      if (second.kind != ParseOutcome::Kind::kCall ||
          first.consumed + second.consumed != out.size() || second.call.strings.at(1) != "x") {
        std::abort();
      }
    }
    pos += o.consumed;
  }
  return 0;
}
