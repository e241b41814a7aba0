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
#include "rewriters/text_error.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::rewriters {

struct PipelineElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // canonical order and values
  std::vector<PipelineElement> children;                     // fixpoint only
  size_t line = 1, column = 1;
  // The pass's declared options (its OptionSpecs), when the element was
  // parsed or made with elementOf / withOptionSpecs: the typed accessors
  // below read their defaults from them and setOption checks against them.
  std::vector<OptionSpec> specs;
  bool isFixpoint() const { return name == "fixpoint"; }
  // The value of option `key`, or `fallback` when the element does not set it.
  std::string option(const std::string& key, const std::string& fallback = "") const;
  // Typed, checked reads: the value the element sets, else the pass's
  // declared default (no default restated at the call). Throws
  // std::logic_error for an option the pass does not declare, or an element
  // made without its pass's specs.
  bool boolOption(const std::string& key) const;
  int64_t intOption(const std::string& key) const;
  std::string stringOption(const std::string& key) const;
  // Sets (or adds, at the end) option `key`; removes it. With the pass's
  // specs known, an undeclared option or a value that does not fit is a
  // std::invalid_argument naming both, and the value is stored canonical.
  void setOption(const std::string& key, const std::string& value);
  void eraseOption(const std::string& key);
};

// An element of pass `name` with its declared options (none set). Throws
// std::invalid_argument for a pass the registry does not have.
PipelineElement elementOf(const PassRegistry& registry, const std::string& name);
// `e` (and a fixpoint's children) with the pass's declared options attached,
// for an element made in code; unknown passes are left as they are.
PipelineElement withOptionSpecs(PipelineElement e, const PassRegistry& registry);

struct Pipeline {
  std::vector<PipelineElement> elements;
  bool empty() const { return elements.empty(); }
};

// An error in pipeline text: `source:line:column: message`, the line and a
// caret (one class with RuleFileError: rewriters/text_error.h).
using PipelineError = TextError;

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
// The device lowering a preset closes with (CUDA targets only).
inline constexpr const char* kTargetPasses = "fuse-cudnn";

// ---- Editing a parsed pipeline (the CLI and the C++ API share these).

// Whether pass `name` runs anywhere in the pipeline (also inside fixpoints).
bool pipelineUses(const Pipeline& p, const std::string& name);
// Removes every execution of pass `name` (also inside fixpoints).
void dropPass(Pipeline& p, const std::string& name);
// ---- What a pipeline's passes declare (Pass::effects), asked instead of
// their names.

using EffectFilter = std::function<bool(const PassEffects&)>;
// The effects of element `e` (not a fixpoint) as configured by its options,
// on `ctx`'s target (a default context: the CPU).
PassEffects elementEffects(const PipelineElement& e, const PassRegistry& registry, const PassContext* ctx = nullptr);
// Whether some execution (also inside fixpoints) has effects `has` selects.
bool pipelineHas(const Pipeline& p, const PassRegistry& registry, const EffectFilter& has,
                 const PassContext* ctx = nullptr);
// Removes every execution (also inside fixpoints) whose effects `drop`
// selects; returns the names removed, each once, in pipeline order.
std::vector<std::string> dropPassesWhere(Pipeline& p, const PassRegistry& registry, const EffectFilter& drop,
                                         const PassContext* ctx = nullptr);
// The executions whose effects `keep` selects, in order, out of their
// fixpoints.
Pipeline passesWhere(const Pipeline& p, const PassRegistry& registry, const EffectFilter& keep,
                     const PassContext* ctx = nullptr);
// Every execution's effects, in order (also inside fixpoints).
std::vector<PassEffects> pipelineEffects(const Pipeline& p, const PassRegistry& registry,
                                         const PassContext* ctx = nullptr);
// Calls `edit` on every execution (also inside fixpoints) with its effects.
void forEachExecution(Pipeline& p, const PassRegistry& registry,
                      const std::function<void(PipelineElement&, const PassEffects&)>& edit,
                      const PassContext* ctx = nullptr);

// The one rule for where extra passes go (the passes after a preset in
// "-O1,more", rule files from --rules): after the pipeline's rewrites and
// before the device lowering it closes with (a trailing kTargetPasses,
// fuse-cudnn), so that the lowering sees their result; at the end when the
// pipeline does not close with it. Extra passes keep their order.
void addExtraPasses(Pipeline& p, const std::vector<PipelineElement>& extra);
// `rules{file=PATH}`: a rule file as a pipeline element (--rules PATH).
PipelineElement rulesElement(const std::string& path);
// `rules{text=NAME}`: the in-memory rule text NAME (rewriters::RuleTexts).
PipelineElement ruleTextElement(const std::string& name);
// A preset alone or followed by more passes ("-O1", "-O1,channels-last";
// the more go by addExtraPasses), or any other pipeline text. Errors in the
// passes after the preset point into that part of the text.
Pipeline parsePipelineOrPreset(const std::string& text, const PassRegistry& registry);

constexpr int kDefaultFixpointIterations = 4;

}  // namespace ptopt::rewriters
