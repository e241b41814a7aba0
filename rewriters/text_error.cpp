#include "rewriters/text_error.h"

namespace ptopt::rewriters {

namespace {
std::string formatError(const std::string& msg, size_t line, size_t col, const std::string& text,
                        const std::string& source) {
  std::string out = source + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg;
  out += "\n  " + text + "\n  " + std::string(col > 0 ? col - 1 : 0, ' ') + "^";
  return out;
}
}  // namespace

TextError::TextError(const std::string& message, size_t line, size_t column, const std::string& lineText,
                     const std::string& source)
    : std::runtime_error(formatError(message, line, column, lineText, source)),
      message_(message), line_(line), column_(column) {}

}  // namespace ptopt::rewriters
