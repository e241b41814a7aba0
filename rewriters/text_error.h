// TextError: an error at a place in text a user wrote (a pipeline, a rule
// file). what() is `source:line:column: message`, then the offending line
// and a caret under the column; message(), line() and column() give the
// parts. PipelineError (rewriters/pipeline.h) and RuleFileError
// (rewriters/rules.h) are this class under the names their callers know.
#pragma once

#include <stdexcept>
#include <string>

namespace ptopt::rewriters {

class TextError : public std::runtime_error {
 public:
  // `line` and `column` are 1-based; `lineText` is the whole offending line;
  // `source` names the text ("--passes", a file name).
  TextError(const std::string& message, size_t line, size_t column, const std::string& lineText,
            const std::string& source);
  const std::string& message() const { return message_; }
  size_t line() const { return line_; }
  size_t column() const { return column_; }

 private:
  std::string message_;
  size_t line_, column_;
};

}  // namespace ptopt::rewriters
