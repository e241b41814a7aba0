// The pass interface.
//
// A pass is a small class: name() is its kebab-case pipeline name,
// description() one line for listings, contract() the prose contract (what it
// matches, what it preserves, when it does not fire), optionSpecs() its typed
// options with defaults. run() rewrites one Graph and returns whether it
// changed anything plus named counters (`folded=53`). A pass that declines a
// rewrite says why through PassContext::decline (shown with --explain).
// Passes make every edit through an ir::Rewriter on PassContext::edits, so
// that each edit is logged with its pass (ir/rewriter.h).
#pragma once

#include "ir/ir.h"
#include "ir/rewriter.h"
#include "rewriters/side_data.h"

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::rewriters {

enum class OptionKind { Bool, Int, Float, String, Enum };

struct OptionSpec {
  std::string name;  // kebab-case
  OptionKind kind = OptionKind::String;
  std::string defaultValue;
  std::string help;
  std::vector<std::string> choices;  // Enum
  std::optional<double> min, max;    // Int / Float
};

// Throws std::invalid_argument when `value` does not fit `spec`; returns the
// canonical spelling (`true`/`false` for bools, the number re-printed).
std::string validateOption(const OptionSpec& spec, const std::string& value);

// An option set after validation (defaults filled in).
class OptionValues {
 public:
  OptionValues() = default;
  explicit OptionValues(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  bool getBool(const std::string& name) const;
  int64_t getInt(const std::string& name) const;
  double getFloat(const std::string& name) const;
  const std::string& getString(const std::string& name) const;
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, std::string>& all() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

// What a pass does beyond rewriting structure, declared by the pass
// (Pass::effects) so that the pass manager and the driver ask it instead of
// knowing it by name.
struct PassEffects {
  // What the pass writes into the graph is computed by running the model or
  // its constants on data (int8 calibration ranges, folded constants). ATen's
  // reductions (convolutions, matmuls) round differently at different
  // intra-op thread counts, so the pass manager runs such a pass at one
  // thread: the output's bytes then do not depend on the thread count of
  // the process (the CLI's physical cores, Python's torch.set_num_threads,
  // OMP_NUM_THREADS), only on the request and the CPU.
  bool computesFromData = false;
  // It may lower the precision of what it rewrites (bf16, fp16, int8): the
  // never-slower stage's fp32 fallback leaves it out, and verification
  // judges the result by the tolerance of that precision.
  bool lowersPrecision = false;
  // It changes the memory layout activations run in (channels-last): the
  // fp32 fallback leaves it out too.
  bool changesLayout = false;
  // It specializes training-mode behaviour for inference (dropout, batch
  // statistics): the reference of a model traced in training mode gets the
  // same specialization.
  bool specializesTraining = false;
  // The device whose ops it emits ("cuda": cuDNN fusions); "" for any. A
  // check on another device leaves it out (the CPU stand-in).
  std::string needsDevice;
  // The precision it introduces as configured, on the context's target
  // (an `auto` choice resolved as run() resolves it; int8: QInt8); nullopt
  // when it introduces none. Verification judges the result by the lowest
  // one of the pipeline (verify/precision.h, verify::Tolerance::forPrecision).
  std::optional<c10::ScalarType> precision;
  // Why it chose that precision, when it chose by the target (one line for
  // the summary); "" otherwise.
  std::string precisionNote;
  // A Bool option that makes it emulate its precision (that rounding, fp32
  // compute) where the checking device cannot run it (fp16 on a CPU); "" when
  // it has none.
  std::string emulateOption;
  // It may turn the model's float32 inputs and outputs into `precision`; a
  // run that did reports how many with the counter kSignatureChangedCounter.
  bool mayChangeSignature = false;
  // How --tune's whole-network alternatives (a network on one kernel family,
  // kernels/) take the pass in, without knowing it by name:
  // `everywhere`: the options that make it apply wherever it can (a layout
  // pass on every region), in order; a value of "" erases the option. Empty
  // when it has no such form.
  std::vector<std::pair<std::string, std::string>> everywhere;
  // `keepFp32Option`: a name-list option that keeps the named ops in fp32
  // (the per-op precision --tune chose), "" when it has none.
  std::string keepFp32Option;
};

inline constexpr const char* kSignatureChangedCounter = "io-changed";

struct PassResult {
  bool changed = false;
  std::vector<std::pair<std::string, int64_t>> counters;  // in first-count order
  void count(const std::string& name, int64_t n = 1);
  int64_t counter(const std::string& name) const;
  std::string countersText() const;  // "folded=3 skipped=1"
};

// What passes may consult and report beyond the graph.
class PassContext {
 public:
  // Example inputs for the method being optimized (shape-prop); empty when
  // the user gave no --input-shape.
  std::optional<std::vector<c10::IValue>> exampleInputs;
  // "cpu" or "cuda": passes that emit device-specific ops check it.
  std::string targetDevice = "cpu";
  // cast{dtype=auto} picks bf16 on CUDA targets too (--prefer-bf16).
  bool preferBf16 = false;
  // The CPU level decisions assume instead of probing this CPU
  // (--assume-isa: "avx2", ...; "": this CPU's own). A value of the run,
  // never process state: target::cpuCapabilities(target::assumedIsa(this)).
  std::string assumedIsa;
  // The result is written in a format whose values are tensors and plain
  // constants (a torch.export .pt2): no kernel that runs on a packed object
  // (oneDNN's and XNNPACK's op contexts) may be chosen.
  bool tensorValuesOnly = false;
  // When set, every decline is also printed here as it happens.
  std::ostream* explain = nullptr;
  // Every edit of every pass, in order (ir/rewriter.h). Passes edit through
  // `ir::Rewriter rw(graph, edits, name())`.
  ir::EditLog edits;
  // What the front end hands to passes, by type (quant::CalibrationData).
  SideData inputs;
  // What passes hand back, by type (quant::QuantizeReport); the front end
  // clears it before a run and reads it after.
  SideData reports;
  // Called with each warning as it is recorded (the front end prints it:
  // the CLI on stderr, Python as a note); none: only recorded.
  std::function<void(const std::string&)> onWarning;

  // A context for a trial run of passes (the tuner's working copy): what
  // passes consult (example inputs, target, preferBf16, inputs), none of
  // what they record (edits, declines, reports, warnings, explain).
  PassContext forTrial() const;

  // Records (and with `explain`, prints) why `pass` leaves `node` alone.
  // A pass in a fixpoint meets the same node every round: a decline already
  // recorded is not repeated. declineOnce says whether it was new, so that a
  // pass counts each declined rewrite once
  // (`if (ctx.declineOnce(...)) r.count("declined")`).
  void decline(const std::string& pass, const ir::Node* node, const std::string& why) { declineOnce(pass, node, why); }
  bool declineOnce(const std::string& pass, const ir::Node* node, const std::string& why);
  const std::vector<std::string>& declines() const { return declines_; }

  // A warning the user must see although the pass goes on (calibrating on
  // random inputs): recorded as "PASS: TEXT" and handed to onWarning.
  void warn(const std::string& pass, const std::string& text);
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::string> warnings_;
  std::vector<std::string> declines_;
  std::set<std::string> declineSet_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual std::string contract() const = 0;
  virtual std::vector<OptionSpec> optionSpecs() const { return {}; }
  virtual PassResult run(ir::Graph& graph, PassContext& ctx) = 0;
  // What this pass, as configured, does beyond rewriting structure on the
  // context's target.
  virtual PassEffects effects(const PassContext& ctx) const { return {}; }

  const OptionValues& options() const { return options_; }
  // Validates `given` against optionSpecs() and fills in defaults. Throws
  // std::invalid_argument naming an unknown option or a bad value.
  void configure(const std::map<std::string, std::string>& given);

 protected:
  PassResult unchanged() const { return {}; }

 private:
  OptionValues options_;
};

// A failure inside a pass; the message names the pass.
class PassError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A short description of a node for messages: `%y = aten::conv2d` plus scope.
std::string describeNode(const ir::Node* n);

}  // namespace ptopt::rewriters
