// libFuzzer target for the HTTP request parser (server/http.cc over llhttp): never a crash,
// consumed bytes stay within the input, and limits hold whatever the split of the input.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "server/http.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sekka::http;
  if (size < 1) return 0;
  const std::size_t split = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  Limits limits;
  limits.max_target = 256;
  limits.max_header_bytes = 1024;
  limits.max_headers = 8;
  limits.max_body = 128;
  RequestParser parser(limits);
  std::size_t pos = 0;
  for (int step = 0; pos < in.size() && step < 10000; ++step) {
    const std::size_t n = std::min(in.size() - pos, split == 0 ? in.size() : split);
    RequestParser::Outcome o = parser.Parse(in.substr(pos, n));
    if (o.consumed > n) std::abort();
    if (o.kind == RequestParser::Kind::kError) {
      if (o.status != 400 && o.status != 413 && o.status != 431) std::abort();
      break;
    }
    if (o.kind == RequestParser::Kind::kRequest) {
      if (o.request.target.size() > limits.max_target) std::abort();
      std::string_view path, query;
      SplitTarget(o.request.target, path, query);
      (void)QueryParam(query, "count");
      // The peers' routes decode path segments and other parameters the same way.
      if (std::optional<std::string> v = PercentDecode(path); v && v->size() > path.size()) {
        std::abort();  // decoding never lengthens
      }
      (void)QueryParam(query, "safeGuardDuration");
    } else if (o.consumed == 0) {
      break;
    }
    pos += o.consumed;
  }
  return 0;
}
