// libFuzzer target for every text parser of the core: ids in each format (against each preset),
// layouts, times, durations (sekka's and ISO-8601), the machine-id file, opaque keys and texts,
// UUIDs and ULIDs, and tag names.
// Besides "no crash, no sanitizer report", it checks that what parses round-trips:
// Format(Parse(text)) parses back to the same value.
//
// Build and run: see scripts/test.sh (clang, -fsanitize=fuzzer,address,undefined).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sekka/codec.h"
#include "sekka/id_check.h"
#include "sekka/layout.h"
#include "sekka/machines.h"
#include "sekka/opaque.h"
#include "sekka/segment.h"
#include "sekka/uuid.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  using namespace sekka;

  const auto& presets = Layout::PresetNames();
  const Layout layout = *Layout::Preset(presets[(selector >> 3) % presets.size()]);
  switch (selector % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4: {
      const auto format = static_cast<IdFormat>(selector % 8);
      Result<Id> id = ParseId(text, format, layout);
      if (!id.ok()) {
        Check(!id.error().message.empty());
        break;
      }
      Check(*id >= 0);
      const std::string again = FormatId(*id, format, layout);
      Result<Id> back = ParseId(again, format, layout);
      Check(back.ok() && *back == *id);
      if (DecodeId(*id, layout).ok()) Check(!FormatId(*id, IdFormat::kFriendly, layout).empty());
      break;
    }
    case 5: {
      if ((selector >> 3) & 1) {
        // The id scanner of `sekka check`: any split of the text gives the same ids and the
        // same count of tokens that are not ids; the ids written back scan to themselves.
        auto scan = [](std::string_view a, std::string_view b, std::uint64_t& bad) {
          IdTextScanner s;
          std::vector<Id> ids;
          auto add = [&](Id id) { ids.push_back(id); };
          s.Feed(a, add);
          s.Feed(b, add);
          s.Finish(add);
          bad = s.bad_count();
          return ids;
        };
        std::uint64_t bad_whole = 0, bad_split = 0, bad_again = 0;
        const std::vector<Id> whole = scan(text, {}, bad_whole);
        const std::size_t cut = text.empty() ? 0 : (selector * 7919u) % (text.size() + 1);
        Check(scan(text.substr(0, cut), text.substr(cut), bad_split) == whole);
        Check(bad_split == bad_whole);
        std::string again;
        for (Id id : whole) again += std::to_string(id) + "\n";
        Check(scan(again, {}, bad_again) == whole && bad_again == 0);
        break;
      }
      Result<Layout> l = ParseLayout(text);
      if (l.ok()) {
        Check(l->max_tick() >= 0);
        const IdFields fields{l->max_tick(), l->datacenter_ids() - 1,
                              l->worker_ids_per_datacenter() - 1, l->max_sequence(),
                              (std::int64_t{1} << l->random_bits()) - 1};
        Result<Id> last = l->Compose(fields);
        Check(last.ok() && *last >= 0 && *last <= l->max_id());
        // Shard bits and a reversed time field decode back to the same fields.
        Result<IdFields> back = l->Decompose(*last);
        Check(back.ok() && *back == fields);
        Check(!l->OrderingNote().empty());
        Check(!l->OrderName().empty());
        (void)FormatUtcMillis(l->end_millis());
      }
      break;
    }
    case 6: {
      if (((selector >> 3) & 3) == 2) {
        // Tag names: a valid one holds no control byte and is shown as it is (but for `"` and
        // `\`); whatever is shown is one line of printable text.
        const Status tag = ValidateTag(text);
        const std::string shown = ShownTag(text);
        for (const char c : shown) Check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
        if (!tag.ok()) {
          Check(!tag.error().message.empty());
          break;
        }
        for (const char c : text) Check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
        if (text.size() <= 60 && text.find_first_of("\"\\") == std::string_view::npos)
          Check(shown == text);
        break;
      }
      if ((selector >> 3) & 1) {
        // UUIDs and ULIDs: what parses writes back and parses to the same value.
        if (Result<Uuid> u = ParseUuid(text); u.ok()) Check(*ParseUuid(FormatUuid(*u)) == *u);
        if (Result<Uuid> u = ParseUlid(text); u.ok()) Check(*ParseUlid(FormatUlid(*u)) == *u);
        break;
      }
      Result<std::int64_t> t = ParseUtcMillis(text);
      if (t.ok() && *t >= 0 && *t < 253402300800000) {  // before year 10000
        Result<std::int64_t> back = ParseUtcMillis(FormatUtcMillis(*t));
        Check(back.ok() && *back == *t);
      }
      break;
    }
    case 7: {
      if (((selector >> 3) & 3) == 3) {
        // Opaque ids: a key file's text, and the text form against a fixed codec.
        Result<std::vector<OpaqueKey>> keys = ParseOpaqueKeys(text);
        if (keys.ok()) Check(!keys->empty() && keys->back().key.size() >= 16);
        static const std::unique_ptr<OpaqueCodec> codec =
            std::move(OpaqueCodec::Create(*ParseOpaqueKeys("a 000102030405060708090a0b0c0d0e0f\n"),
                                          Layout::Default()))
                .value();
        Result<Id> id = codec->DecodeText(text);
        if (id.ok()) {
          Check(*id >= 0);
          Check(*codec->Decode(*codec->Encode(*id)) == *id);
        } else {
          Check(!id.error().message.empty());
        }
        break;
      }
      if (((selector >> 3) & 3) == 2) {
        // The machine-id file (the CosId distributor's records): what parses writes back to
        // the same records.
        Result<std::vector<MachineRecord>> records = ParseMachineRecords(text);
        if (records.ok()) {
          Result<std::vector<MachineRecord>> back =
              ParseMachineRecords(FormatMachineRecords(*records));
          Check(back.ok() && *back == *records);
        } else {
          Check(!records.error().message.empty());
        }
        break;
      }
      if (((selector >> 3) & 3) == 1) {
        // ISO-8601: what parses writes back as PT<s>.<ms>S and parses to the same value.
        Result<std::int64_t> d = ParseIsoDurationMillis(text);
        if (d.ok()) {
          Check(*d >= 0);
          const std::string again = "PT" + std::to_string(*d / 1000) + "." +
                                    std::to_string(1000 + *d % 1000).substr(1) + "S";
          Result<std::int64_t> back = ParseIsoDurationMillis(again);
          Check(back.ok() && *back == *d);
        }
        break;
      }
      Result<std::int64_t> d = ParseDurationMillis(text);
      if (d.ok()) Check(*d >= 0);
      break;
    }
  }
  return 0;
}
