// sekka segment create|list|show|step|delete|import: tag management in any segment store.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/segment_store_uri.h"
#include "cli/commands.h"

namespace sekka::cli {

namespace {

// The SQLite file that `flags` name: the data dir's, or the one of a sqlite: store; "" for any
// other store.
std::string SqlitePathOf(const SegmentFlags& flags) {
  return flags.store.empty()                    ? flags.data_dir + "/segments.db"
         : flags.store.rfind("sqlite:", 0) == 0 ? flags.store.substr(7)
                                                : std::string();
}

// Prints `e` and returns the exit code: usage for a bad argument, an unknown tag or one that
// exists, else failure.
int FailWith(const Error& e) {
  const bool usage = e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kNotFound ||
                     e.code == ErrorCode::kAlreadyExists;
  return Fail(usage ? kExitUsage : kExitFailure, e.message);
}

// A tag as one line of text: its name, next id and step (and delta and remainder, when it has
// them), and why sekka does not serve it, if it does not.
std::string TagLine(const TagInfo& t) {
  // A name of more than A-Z a-z 0-9 _ . : - is shown quoted and escaped, so that a space or a
  // quote in it never reads as the line's next field; a row a peer's table holds under a name
  // sekka cannot serve comes with the reason (sekka's own tables hold valid names only).
  const Status name = ValidateTag(t.tag);
  const bool plain = std::all_of(t.tag.begin(), t.tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
  const std::string shown = plain && name.ok() ? t.tag : "\"" + ShownTag(t.tag) + "\"";
  std::string line = fmt::format("{} next_id={} step={}", shown, t.next_id, t.step);
  if (t.delta != 1) line += fmt::format(" delta={} remainder={}", t.delta, t.remainder);
  if (!name.ok()) {
    const std::string& why = name.error().message;
    const std::size_t at = why.find("is not valid: ");
    line += " (not served: " + (at == std::string::npos ? why : why.substr(at + 14)) + ")";
  }
  return line;
}

// Prints a tag on stdout: one line of JSON, or of text.
void ShowTag(const TagInfo& t, bool json) {
  if (json) {
    std::cout << nlohmann::ordered_json{{"tag", t.tag},
                                        {"next_id", std::to_string(t.next_id)},
                                        {"step", t.step},
                                        {"delta", t.delta},
                                        {"remainder", t.remainder}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';  // a peer's row may hold bytes that are not UTF-8
    return;
  }
  std::cout << TagLine(t) << '\n';
}

// Runs the action on one tag (create, step, import, delete, show) and returns the tag to show.
Result<TagInfo> RunTagAction(SegmentStore& store, const SegmentFlags& flags) {
  if (flags.action == "create") {
    const TagInfo tag{flags.tag, flags.start, flags.step, flags.delta, flags.remainder};
    SEKKA_RETURN_IF_ERROR(store.CreateTag(tag));
    return tag;
  }
  if (flags.action == "step") {
    SEKKA_RETURN_IF_ERROR(store.SetStep(flags.tag, flags.step));
    return store.GetTag(flags.tag);
  }
  if (flags.action == "import") {
    // sekka's new row: its next id is where the peer's row was.
    return store.ImportTag(flags.tag, flags.from);
  }
  if (flags.action == "delete") {
    // The row as it was: its next id is where the tag may start again.
    return store.DeleteTag(flags.tag);
  }
  return store.GetTag(flags.tag);
}

// Prints every tag of `store`. Returns the exit code.
int ListTags(SegmentStore& store, bool json) {
  // A page at a time: a store of a million tags is listed in bounded memory.
  constexpr std::size_t kPage = 1000;
  std::string after;
  for (;;) {
    Result<std::vector<TagInfo>> tags = store.ListTagsAfter(after, kPage);
    if (!tags.ok()) return FailWith(tags.error());
    for (const TagInfo& t : *tags) ShowTag(t, json);
    if (tags->size() < kPage) return kExitOk;
    after = tags->back().tag;
  }
}

}  // namespace

int RunSegment(const SegmentFlags& flags) {
  // Reading makes nothing: a SQLite store that is not there is an error, not a new file.
  const std::string sqlite = SqlitePathOf(flags);
  if (flags.action != "create" && !sqlite.empty() && !std::filesystem::exists(sqlite)) {
    return Fail(kExitFailure, fmt::format("there is no segment store at {}: `sekka segment create` "
                                          "makes one, or give --data-dir or --segment-store",
                                          sqlite));
  }
  Result<std::unique_ptr<SegmentStore>> store = OpenSegmentStore(flags.store, flags.data_dir);
  if (!store.ok()) {
    return Fail(store.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure,
                store.error().message);
  }
  const std::string_view a = flags.action;
  if (a == "create" || a == "step" || a == "import" || a == "delete" || a == "show") {
    Result<TagInfo> t = RunTagAction(**store, flags);
    if (!t.ok()) return FailWith(t.error());
    ShowTag(*t, flags.json);
    return kExitOk;
  }
  return ListTags(**store, flags.json);
}

}  // namespace sekka::cli
