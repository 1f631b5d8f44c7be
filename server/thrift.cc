#include "server/thrift.h"

#include <fmt/format.h>

namespace sekka::thrift {
namespace {

// Thrift's type ids.
enum Type : std::uint8_t {
  kStop = 0,
  kBool = 2,
  kByte = 3,
  kDouble = 4,
  kI16 = 6,
  kI32 = 8,
  kI64 = 10,
  kString = 11,
  kStruct = 12,
  kMap = 13,
  kSet = 14,
  kList = 15,
};

constexpr std::uint32_t kVersionMask = 0xffff0000;
constexpr std::uint32_t kVersion1 = 0x80010000;

// Reads big-endian values from a frame; any read past the end sets `error`.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::size_t remaining() const { return data_.size() - pos_; }
  void Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }

  std::uint64_t ReadUnsigned(int bytes) {
    if (remaining() < static_cast<std::size_t>(bytes)) {
      Fail(fmt::format("the message ends inside a value (at byte {})", pos_));
      pos_ = data_.size();
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<std::uint8_t>(data_[pos_++]);
    return v;
  }
  std::uint8_t ReadByte() { return static_cast<std::uint8_t>(ReadUnsigned(1)); }
  std::int16_t ReadI16() { return static_cast<std::int16_t>(ReadUnsigned(2)); }
  std::int32_t ReadI32() { return static_cast<std::int32_t>(ReadUnsigned(4)); }

  // A length-prefixed string (or binary) of `length` bytes.
  std::string_view ReadBytes(std::int64_t length) {
    if (length < 0 || static_cast<std::uint64_t>(length) > remaining()) {
      Fail(fmt::format("a string of {} bytes does not fit the {} bytes left", length, remaining()));
      pos_ = data_.size();
      return {};
    }
    std::string_view s = data_.substr(pos_, static_cast<std::size_t>(length));
    pos_ += static_cast<std::size_t>(length);
    return s;
  }
  std::string_view ReadString() { return ReadBytes(ReadI32()); }

  // Skips one value of `type`.
  void Skip(std::uint8_t type, int depth) {
    if (depth <= 0) {
      Fail("values are nested too deeply");
      return;
    }
    switch (type) {
      case kBool:
      case kByte:
        ReadUnsigned(1);
        return;
      case kI16:
        ReadUnsigned(2);
        return;
      case kI32:
        ReadUnsigned(4);
        return;
      case kDouble:
      case kI64:
        ReadUnsigned(8);
        return;
      case kString:
        ReadString();
        return;
      case kStruct:
        while (ok()) {
          const std::uint8_t field = ReadByte();
          if (field == kStop) return;
          ReadI16();
          Skip(field, depth - 1);
        }
        return;
      case kMap: {
        const std::uint8_t key = ReadByte();
        const std::uint8_t value = ReadByte();
        SkipElements(ReadI32(), 2, depth, [&] {
          Skip(key, depth - 1);
          Skip(value, depth - 1);
        });
        return;
      }
      case kSet:
      case kList: {
        const std::uint8_t element = ReadByte();
        SkipElements(ReadI32(), 1, depth, [&] { Skip(element, depth - 1); });
        return;
      }
      default:
        Fail(fmt::format("unknown field type {}", type));
    }
  }

 private:
  // Every element takes at least one byte, so a count larger than what is left is a lie that
  // must not cost a loop of that length.
  template <typename F>
  void SkipElements(std::int32_t count, std::int32_t bytes_each, int, F skip_one) {
    if (count < 0 ||
        static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(bytes_each) > remaining()) {
      Fail(fmt::format("a collection of {} elements does not fit the {} bytes left", count,
                       remaining()));
      return;
    }
    for (std::int32_t i = 0; i < count && ok(); ++i) skip_one();
  }

  std::string_view data_;
  std::size_t pos_ = 0;
  std::string error_;
};

void AppendU32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
}

void AppendString(std::string& out, std::string_view s) {
  AppendU32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

// Starts a framed message; returns where its frame length goes (filled by EndFrame).
std::size_t BeginMessage(std::string& out, std::string_view name, MessageType type,
                         std::int32_t seqid) {
  const std::size_t at = out.size();
  AppendU32(out, 0);
  AppendU32(out, kVersion1 | static_cast<std::uint8_t>(type));
  AppendString(out, name);
  AppendU32(out, static_cast<std::uint32_t>(seqid));
  return at;
}

void EndFrame(std::string& out, std::size_t at) {
  const auto length = static_cast<std::uint32_t>(out.size() - at - 4);
  for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>((length >> (24 - 8 * i)) & 0xff);
}

}  // namespace

ParseOutcome ParseFrame(std::string_view data, const Limits& limits) {
  ParseOutcome o;
  if (data.size() < 4) return o;
  const std::int32_t length = Reader(data.substr(0, 4)).ReadI32();
  if (length <= 0 || static_cast<std::size_t>(length) > limits.max_frame) {
    o.kind = ParseOutcome::Kind::kBadFrame;
    o.error = fmt::format("a frame of {} bytes: allowed 1 to {} (the framed transport)", length,
                          limits.max_frame);
    return o;
  }
  if (data.size() - 4 < static_cast<std::size_t>(length)) return o;
  o.consumed = 4 + static_cast<std::size_t>(length);
  Reader r(data.substr(4, static_cast<std::size_t>(length)));
  Call& call = o.call;
  const std::int32_t first = r.ReadI32();
  if (first < 0) {  // strict: version and type, then the name
    const auto word = static_cast<std::uint32_t>(first);
    if ((word & kVersionMask) != kVersion1) {
      o.kind = ParseOutcome::Kind::kBadMessage;
      o.error = fmt::format("protocol version {:#x}: allowed {:#x} (the binary protocol)",
                            word & kVersionMask, kVersion1);
      return o;
    }
    call.type = static_cast<MessageType>(word & 0xff);
    call.name = std::string(r.ReadString());
  } else {  // old style: the name first, then a byte for the type
    call.name = std::string(r.ReadBytes(first));
    call.type = static_cast<MessageType>(r.ReadByte());
  }
  call.seqid = r.ReadI32();
  while (r.ok()) {
    const std::uint8_t type = r.ReadByte();
    if (!r.ok() || type == kStop) break;
    const std::int16_t id = r.ReadI16();
    if (type == kString) {
      std::string_view value = r.ReadString();
      if (r.ok()) call.strings[id] = std::string(value);
    } else {
      r.Skip(type, limits.max_depth);
    }
  }
  if (r.ok() && r.remaining() > 0) {
    r.Fail(fmt::format("{} bytes follow the end of the message", r.remaining()));
  }
  if (!r.ok()) {
    o.kind = ParseOutcome::Kind::kBadMessage;
    o.error = r.error();
    return o;
  }
  o.kind = ParseOutcome::Kind::kCall;
  return o;
}

void AppendI64Reply(std::string& out, std::string_view name, std::int32_t seqid,
                    std::int64_t value) {
  const std::size_t at = BeginMessage(out, name, MessageType::kReply, seqid);
  out += static_cast<char>(kI64);
  out += '\0';  // field id 0: success
  out += '\0';
  const auto v = static_cast<std::uint64_t>(value);
  AppendU32(out, static_cast<std::uint32_t>(v >> 32));
  AppendU32(out, static_cast<std::uint32_t>(v));
  out += static_cast<char>(kStop);
  EndFrame(out, at);
}

void AppendException(std::string& out, std::string_view name, std::int32_t seqid,
                     ExceptionType type, std::string_view message) {
  const std::size_t at = BeginMessage(out, name, MessageType::kException, seqid);
  out += static_cast<char>(kString);
  out += '\0';
  out += '\1';
  AppendString(out, message);
  out += static_cast<char>(kI32);
  out += '\0';
  out += '\2';
  AppendU32(out, static_cast<std::uint32_t>(type));
  out += static_cast<char>(kStop);
  EndFrame(out, at);
}

}  // namespace sekka::thrift
