// libFuzzer target for the RESP parser (server/resp.cc): never a crash, never a read outside the
// input, and a command parses the same when it is fed in two pieces.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/resp.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sekka::resp;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Limits limits;
  limits.max_args = 16;
  limits.max_bulk = 1024;
  limits.max_inline = 1024;
  std::size_t pos = 0;
  while (pos < in.size()) {
    ParseResult r = ParseCommand(in.substr(pos), limits);
    if (r.status != ParseStatus::kComplete) break;
    if (r.consumed == 0 || r.consumed > in.size() - pos) std::abort();
    if (r.args.size() > limits.max_args) std::abort();
    for (std::string_view a : r.args) {
      if (a.data() < in.data() + pos || a.data() + a.size() > in.data() + pos + r.consumed) {
        std::abort();
      }
    }
    // Any proper prefix of a complete command needs more (or is itself malformed), never
    // complete with a different meaning.
    const std::size_t cut = r.consumed / 2;
    if (cut > 0) {
      ParseResult part = ParseCommand(in.substr(pos, cut), limits);
      if (part.status == ParseStatus::kComplete && part.consumed > cut) std::abort();
    }
    pos += r.consumed;
  }
  return 0;
}
