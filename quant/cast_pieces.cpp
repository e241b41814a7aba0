// cast's lists of pieces (the contract is in quant/cast_pieces.h).
#include "quant/cast_pieces.h"

#include <algorithm>

namespace ptopt::quant {

namespace {

struct Reads {
  bool fp32 = false, low = false;
};

// Views nest only so deep in practice; the bound keeps a pathological chain cheap.
constexpr int kMaxFollowDepth = 8;

Reads readsOf(const ir::Value* v, const PrecisionPolicy& policy, const std::set<std::string>& keepFp32, int depth) {
  Reads r;
  for (const auto& u : v->uses()) {
    const ir::Node* user = u.user;
    if (!user->isCall() || !user->blocks().empty()) {  // a graph output, control flow: the original dtype
      r.fp32 = true;
      continue;
    }
    const OpPrecision cls = policy.classify(*user);
    const bool kept = user->numOutputs() >= 1 && keepFp32.count(user->output(0)->name());
    if (cls == OpPrecision::LowPrecision) {
      (kept ? r.fp32 : r.low) = true;
    } else if (cls == OpPrecision::Fp32) {
      r.fp32 = true;
    } else if (cls == OpPrecision::Follow && user->numOutputs() == 1 && user->output()->isTensor() &&
               depth < kMaxFollowDepth) {
      const Reads next = readsOf(user->output(), policy, keepFp32, depth + 1);
      r.fp32 = r.fp32 || next.fp32;
      r.low = r.low || next.low;
    }
  }
  return r;
}

}  // namespace

bool returnsTensorList(const ir::Node* n) {
  if (n->numOutputs() != 1 || !n->output()->type()) return false;
  const auto list = n->output()->type()->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

bool listOnlyUnpacked(const ir::Node* n) {
  const auto& uses = n->output()->uses();
  return !uses.empty() && std::all_of(uses.begin(), uses.end(), [n](const ir::Use& u) {
    return u.user->is("prim::ListUnpack") && u.user->owningBlock() == n->owningBlock();
  });
}

PieceReaders pieceReaders(const ir::Node* n, const PrecisionPolicy& policy, const std::set<std::string>& keepFp32) {
  PieceReaders out;
  for (const auto& u : n->output()->uses())
    for (const auto& piece : u.user->outputs()) {
      const Reads r = readsOf(piece.get(), policy, keepFp32, 0);
      out.fp32 += r.fp32;
      out.low += r.low;
    }
  return out;
}

}  // namespace ptopt::quant
