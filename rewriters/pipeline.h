// Pipeline text: `a,b{k=v,k2=v2},fixpoint{max-iter=N}(c,d)`.
//
// Whitespace and newlines are free between tokens, `#` starts a comment to
// the end of the line (for --pipeline-file). Option values are bare words or
// double-quoted strings (for values with commas). `fixpoint{max-iter=N}(...)`
// repeats its children until none changes the graph or N rounds ran. The
// printer is canonical: options in declaration order with canonical values,
// so parse -> print -> parse gives the same text.
#pragma once

#include "rewriters/registry.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::rewriters {

struct PipelineElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // canonical order and values
  std::vector<PipelineElement> children;                     // fixpoint only
  size_t line = 1, column = 1;
  bool isFixpoint() const { return name == "fixpoint"; }
};

struct Pipeline {
  std::vector<PipelineElement> elements;
  bool empty() const { return elements.empty(); }
};

class PipelineError : public std::runtime_error {
 public:
  PipelineError(const std::string& message, size_t line, size_t column, const std::string& lineText,
                const std::string& source);
  const std::string& message() const { return message_; }
  size_t line() const { return line_; }
  size_t column() const { return column_; }

 private:
  std::string message_;
  size_t line_, column_;
};

// `source` names the text in errors ("--passes", a file name).
Pipeline parsePipeline(const std::string& text, const PassRegistry& registry,
                       const std::string& source = "pipeline");
std::string printPipeline(const Pipeline& p);

// The presets -O0..-O3 as canonical pipeline text (see pipeline.cpp for the
// reason behind each ordering constraint). Throws for other levels.
std::string presetPipeline(int level);
// A preset without the target-specific passes it ends with (kTargetPasses):
// presetPipeline(n) == presetPipelineBody(n) + "," + kTargetPasses.
std::string presetPipelineBody(int level);
inline constexpr const char* kTargetPasses = "fuse-cudnn";

constexpr int kDefaultFixpointIterations = 4;

}  // namespace ptopt::rewriters
