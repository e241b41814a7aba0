#include "quant/cast_values.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "quant/cast.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace ptopt::quant {

using namespace rewriters;

void CastValues::markLowered(ir::Value* v) {
  auto& s = state(v);
  s.original = kFloat;
  s.lowered = true;
  s.weak = false;
  if (!cfg_.emulate && v->meta().dtype) {
    ir::TensorMeta m = v->meta();
    m.dtype = cfg_.target;
    rw_.setMeta(v, m);
  }
}

ir::Value* CastValues::toLow(ir::Value* v, ir::Node* user) {
  if (state(v).weak && constantTensor(v)) return convertedConstant(v);
  if (auto it = castSource_.find(v); it != castSource_.end() && state(it->second).lowered) return it->second;
  return cast(v, cfg_.target, user, /*lowered=*/true);
}

ir::Value* CastValues::toOriginal(ir::Value* v, ir::Node* user) {
  if (cfg_.emulate) return v;  // emulated values are float32 already
  const c10::ScalarType to = state(v).original.value_or(kFloat);
  if (auto it = castSource_.find(v); it != castSource_.end() && !state(it->second).lowered) return it->second;
  return cast(v, to, user, /*lowered=*/false);
}

// `aten::to(v, dtype)` before `user`, reused where an earlier one dominates.
ir::Value* CastValues::cast(ir::Value* v, c10::ScalarType to, ir::Node* user, bool lowered) {
  // A value written in place is cast afresh at every use (a cast copies).
  const bool memoizable = !mayBeWritten(v);
  const auto key = std::make_pair(v, lowered);
  if (memoizable) {
    auto range = castMemo_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it)
      if (dominates(it->second, user)) return it->second->output();
  }
  ir::Value* c;
  if (cfg_.emulate) {
    ir::Value* down = rw_.call(user, "aten::to.dtype", {v, cfg_.target, false, false, ir::Literal(ir::NoneLiteral{})});
    castNodes_.insert(down->node());
    c = rw_.call(user, "aten::to.dtype", {down, kFloat, false, false, ir::Literal(ir::NoneLiteral{})});
  } else {
    c = rw_.call(user, "aten::to.dtype", {v, to, false, false, ir::Literal(ir::NoneLiteral{})});
  }
  castNodes_.insert(c->node());
  ir::TensorMeta m = v->meta();
  if (!cfg_.emulate && m.dtype) m.dtype = to;
  rw_.setMeta(c, m);
  if (lowered) markLowered(c);
  else state(c).original = to;
  castSource_[c] = v;
  if (memoizable) castMemo_.emplace(key, c->node());
  return c;
}

// True when `earlier` (already in the graph) runs before `n` on every path:
// same block and earlier, or an ancestor block of n's.
bool CastValues::dominates(const ir::Node* earlier, const ir::Node* n) {
  const ir::Block* b = earlier->owningBlock();
  const ir::Node* anc = n->ancestorIn(b);
  return anc && (anc == earlier || earlier->isBefore(anc));
}

// Emulation: the op's result rounded through the target dtype.
void CastValues::roundResult(ir::Value* out) {
  ir::Node* n = out->node();
  ir::Node* next = n->next();
  ir::Value* down = rw_.call(next, "aten::to.dtype", {out, cfg_.target, false, false, ir::Literal(ir::NoneLiteral{})});
  ir::Value* up = rw_.call(next, "aten::to.dtype", {down, kFloat, false, false, ir::Literal(ir::NoneLiteral{})});
  castNodes_.insert(down->node());
  castNodes_.insert(up->node());
  rw_.replaceUsesIf(out, up, [&](const ir::Use& u) { return u.user != down->node(); });
  rw_.setMeta(up, out->meta());
  markLowered(up);
}

// The weight as a new constant in the target dtype (emulate: rounded, float32).
ir::Value* CastValues::convertedConstant(ir::Value* v) {
  if (auto it = convertedValues_.find(v); it != convertedValues_.end()) return it->second;
  const std::string& name = v->node()->target();
  std::string& newName = convertedNames_[name];
  if (newName.empty()) {
    at::Tensor t = *constantTensor(v);
    if (cfg_.target == c10::ScalarType::Half && cfg_.clamp) {
      const double maxAbs = t.numel() ? t.abs().max().item<double>() : 0.0;
      if (maxAbs > kFp16Max) {
        t = t.clamp(-kFp16Max, kFp16Max);
        ++clamped_;
        ctx_.decline(pass_, v->node(), fmt::format("weight {} clamped to the fp16 range (max |w| was {:g})", name, maxAbs));
      }
    }
    at::Tensor converted = t.to(cfg_.target);
    if (cfg_.emulate) converted = converted.to(kFloat);
    const char* suffix = cfg_.target == c10::ScalarType::Half ? "_fp16" : "_bf16";
    // Dense, in the layout it had: channels-last weights (from the
    // channels-last pass) stay channels-last, or every conv would convert.
    newName = rw_.storeConstant(name + suffix, converted.contiguous(t.suggest_memory_format()));
    ++weights_;
  }
  ir::Node* get = g_.createGetAttr(newName, c10::TensorType::get());
  ir::Value* nv = get->output();
  nv->meta() = v->meta();  // lint: detached (its insert is the edit)
  if (!cfg_.emulate && nv->meta().dtype) nv->meta().dtype = cfg_.target;  // lint: detached (its insert is the edit)
  rw_.insertAfter(get, v->node());
  markLowered(nv);
  convertedValues_[v] = nv;
  convertedSources_.push_back(v);
  return nv;
}

// A float32 factory result read only through casts to the target dtype
// gets the target dtype literal instead.
void CastValues::sinkFactoryCasts() {
  for (ir::Node* f : factories_) {
    ir::Value* out = f->output();
    if (!out->hasUses()) continue;
    bool allCasts = true;
    for (const ir::Use& u : out->uses())
      allCasts = allCasts && castNodes_.count(u.user) && state(u.user->output()).lowered && u.argIndex == 0;
    if (!allCasts) continue;
    const auto idx = ir::OpView::of(f).indexOf("dtype");
    if (!idx) continue;
    rw_.setArg(f, *idx, ir::Literal(cfg_.target));
    ++literals_;
    for (const ir::Use& u : std::vector<ir::Use>(out->uses())) {
      ir::Node* c = u.user;
      castNodes_.erase(c);
      rw_.replace(c, out);
    }
    markLowered(out);
  }
}

void CastValues::finish() {
  sinkFactoryCasts();
  for (ir::Value* v : convertedSources_) rw_.eraseConstantIfUnused(v);  // the table keeps it for other methods
}

size_t CastValues::castsLeft() const {
  size_t casts = 0;
  g_.walk([&](ir::Node* n) { casts += castNodes_.count(n) != 0; });
  return casts;
}

}  // namespace ptopt::quant
