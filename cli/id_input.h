// cli/id_input.h
//
// Where `sekka check` and `sekka stats` read ids from: files (or stdin), or a query on a
// database (backends/id_query.h). Tokens that are not ids are counted by the scanner.

#ifndef SEKKA_CLI_ID_INPUT_H_
#define SEKKA_CLI_ID_INPUT_H_

#include <functional>
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
// Reads every id, in order, into `sink`. Errors: kUnavailable (a file or database that cannot
// be read), kInvalidArgument (a query the database refuses).
Status ReadIds(const IdInput& input, IdTextScanner& scanner, const std::function<void(Id)>& sink);

}  // namespace sekka::cli

#endif  // SEKKA_CLI_ID_INPUT_H_
