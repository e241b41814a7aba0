// cast's values: what the cast pass knows about each value, and the
// conversions it materializes in the graph.
//
// Contract. The cast pass (quant/cast.h) walks the graph once and decides,
// op by op, which run in the target dtype (the assignment, in cast.cpp); this
// class holds each value's state (its original dtype, whether it holds the
// target dtype now, whether it is a weak constant or factory result that
// adapts to its consumers) and makes the conversions that the decisions
// need, through the pass's rewriter:
//   toLow / toOriginal  `aten::to(v, dtype)` before a user, reused where an
//                       earlier one dominates it (not for a value written in
//                       place: a cast copies); a weak constant becomes a new
//                       constant in the target dtype instead (fp16 with
//                       clamp: clamped to its range);
//   roundResult         emulation: an op's result rounded through the target
//                       dtype and back to float32;
//   finish              factory results read only through casts to the target
//                       dtype get that dtype literal instead, and the
//                       constants replaced by converted ones are erased when
//                       nothing reads them.
#pragma once

#include "ir/ir.h"
#include "ir/mutation.h"
#include "ir/rewriter.h"
#include "rewriters/pass.h"

#include <c10/core/ScalarType.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ptopt::quant {

constexpr auto kFloat = c10::ScalarType::Float;

// What the pass knows about one value.
struct ValueState {
  std::optional<c10::ScalarType> original;  // dtype in the original program
  bool lowered = false;  // holds the target dtype now (emulate: rounded through it)
  bool weak = false;     // a constant or factory result: adapts to its consumers
};

class CastValues {
 public:
  struct Target {
    c10::ScalarType target;
    bool emulate = false, clamp = false;
  };

  CastValues(ir::Graph& g, ir::Rewriter& rw, rewriters::PassContext& ctx, std::string pass, Target cfg,
             const ir::MutationAnalysis& mutation)
      : g_(g), rw_(rw), ctx_(ctx), pass_(std::move(pass)), cfg_(cfg), mutation_(mutation) {}

  ValueState& state(const ir::Value* v) { return states_[v]; }
  // `v` holds the target dtype from now on (its metadata says so unless emulated).
  void markLowered(ir::Value* v);

  ir::Value* toLow(ir::Value* v, ir::Node* user);
  ir::Value* toOriginal(ir::Value* v, ir::Node* user);
  // `aten::to(v, to)` before `user` (reused where an earlier one dominates).
  ir::Value* cast(ir::Value* v, c10::ScalarType to, ir::Node* user, bool lowered);
  void roundResult(ir::Value* out);

  // A float32 factory result with a dtype literal (finish may retarget it).
  void addFactory(ir::Node* f) { factories_.push_back(f); }
  // A new value standing for one written in place (cast afresh at every use).
  void noteWritten(const ir::Value* v) { written_.insert(v); }
  void finish();

  // The casts this pass made that are still in the graph.
  size_t castsLeft() const;
  int64_t weights() const { return weights_; }
  int64_t literals() const { return literals_; }
  int64_t clamped() const { return clamped_; }

 private:
  bool mayBeWritten(const ir::Value* v) const { return mutation_.mayBeWritten(v) || written_.count(v); }
  static bool dominates(const ir::Node* earlier, const ir::Node* n);
  ir::Value* convertedConstant(ir::Value* v);
  void sinkFactoryCasts();

  ir::Graph& g_;
  ir::Rewriter& rw_;
  rewriters::PassContext& ctx_;
  std::string pass_;
  Target cfg_;
  const ir::MutationAnalysis& mutation_;
  std::unordered_map<const ir::Value*, ValueState> states_;
  std::multimap<std::pair<ir::Value*, bool>, ir::Node*> castMemo_;
  std::unordered_map<ir::Value*, ir::Value*> castSource_;
  std::set<ir::Node*> castNodes_;
  std::unordered_map<ir::Value*, ir::Value*> convertedValues_;
  std::map<std::string, std::string> convertedNames_;
  std::vector<ir::Value*> convertedSources_;
  std::vector<ir::Node*> factories_;
  std::set<const ir::Value*> written_;
  int64_t weights_ = 0, literals_ = 0, clamped_ = 0;
};

}  // namespace ptopt::quant
