// backends/one_line.h
//
// A database's error text fit for sekka's one-line errors and logs: line breaks become spaces,
// trailing spaces go (libpq ends its messages with a newline; MariaDB's may hold several lines).

#ifndef SEKKA_BACKENDS_ONE_LINE_H_
#define SEKKA_BACKENDS_ONE_LINE_H_

#include <string>
#include <string_view>

namespace sekka {

inline std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = (c == '\n' || c == '\r') ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace sekka

#endif  // SEKKA_BACKENDS_ONE_LINE_H_
