// cli/id_input.h
//
// Where `sekka check` and `sekka stats` read ids from: files (or stdin), or a query on a
// database (backends/id_query.h). Tokens that are not ids are counted by the scanner.

#ifndef SEKKA_CLI_ID_INPUT_H_
#define SEKKA_CLI_ID_INPUT_H_

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sekka/id_check.h"
#include "sekka/status.h"

namespace sekka::cli {

struct IdInput {
  std::vector<std::string> files;  // none (and no db): stdin; "-" is stdin
  std::string db;                  // sqlite:PATH or postgres://...
  std::string query;               // with db
};

// Checks the combination. Errors: kInvalidArgument naming what goes together.
Status CheckIdInput(const IdInput& input);
// About how many ids the files hold (their size over 19 bytes, a 64-bit id and a newline); 0
// for stdin or a database.
std::size_t EstimateIds(const IdInput& input);
// Reads every id, in order, into `sink`, in blocks (of up to 64 Ki ids). The reading and parsing
// run on a second thread, a few blocks ahead of `sink`, which runs on the calling thread; the
// scanner belongs to the reader until ReadIds returns. Errors: kUnavailable (a file or database
// that cannot be read), kInvalidArgument (a query the database refuses).
Status ReadIds(const IdInput& input, IdTextScanner& scanner,
               const std::function<void(std::span<const Id>)>& sink);

}  // namespace sekka::cli

#endif  // SEKKA_CLI_ID_INPUT_H_
