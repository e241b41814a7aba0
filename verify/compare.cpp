#include "verify/compare.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace ptopt::verify {

namespace {

void compareInto(const c10::IValue& a, const c10::IValue& b, const std::string& path,
                 const Tolerance& tol, std::vector<LeafComparison>& out) {
  LeafComparison leaf;
  leaf.path = path;
  auto mismatch = [&](const std::string& why) {
    leaf.structureOk = false;
    leaf.problem = why;
    out.push_back(leaf);
  };
  if (a.isTensor() != b.isTensor()) return mismatch("one side is a tensor, the other a " + (a.isTensor() ? b : a).tagKind());
  if (a.isTensor()) {
    at::Tensor x = a.toTensor(), y = b.toTensor();
    leaf.numel = y.numel();
    if (x.sizes() != y.sizes()) return mismatch(fmt::format("shape {} vs reference {}", fmt::join(x.sizes(), "x"), fmt::join(y.sizes(), "x")));
    leaf.bitwiseEqual = x.scalar_type() == y.scalar_type() && x.device() == y.device() && at::equal(x, y);
    if (x.scalar_type() != y.scalar_type()) leaf.problem = std::string("dtype ") + c10::toString(x.scalar_type()) + " vs reference " + c10::toString(y.scalar_type());
    if (leaf.numel == 0) { out.push_back(leaf); return; }
    at::Tensor xd = x.detach().to(at::kDouble), yd = y.detach().to(at::kDouble);
    at::Tensor diff = (xd - yd).abs();
    // NaN where both sides are NaN counts as equal.
    at::Tensor bothNan = at::isnan(xd) & at::isnan(yd);
    diff = at::where(bothNan, at::zeros_like(diff), diff);
    leaf.maxAbs = diff.max().item<double>();
    leaf.maxRel = (diff / yd.abs().clamp_min(1e-12)).max().item<double>();
    leaf.mismatchFraction = (diff > (tol.atol + tol.rtol * yd.abs())).to(at::kDouble).mean().item<double>();
    if (std::isnan(leaf.maxAbs)) leaf.mismatchFraction = 1;
    const double nx = xd.norm().item<double>(), ny = yd.norm().item<double>();
    leaf.cosine = (nx == 0 && ny == 0) ? 1.0 : (xd.flatten().dot(yd.flatten()).item<double>() / std::max(nx * ny, 1e-300));
    out.push_back(leaf);
    return;
  }
  if ((a.isTuple() || a.isList()) && (b.isTuple() || b.isList())) {
    std::vector<c10::IValue> xs = a.isTuple() ? a.toTupleRef().elements().vec() : a.toListRef().vec();
    std::vector<c10::IValue> ys = b.isTuple() ? b.toTupleRef().elements().vec() : b.toListRef().vec();
    if (a.isTuple() != b.isTuple()) return mismatch(std::string(a.isTuple() ? "tuple" : "list") + " vs reference " + (b.isTuple() ? "tuple" : "list"));
    if (xs.size() != ys.size()) return mismatch(fmt::format("{} elements vs reference {}", xs.size(), ys.size()));
    for (size_t i = 0; i < xs.size(); ++i) compareInto(xs[i], ys[i], fmt::format("{}[{}]", path, i), tol, out);
    return;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto da = a.toGenericDict(), db = b.toGenericDict();
    if (da.size() != db.size()) return mismatch(fmt::format("{} keys vs reference {}", da.size(), db.size()));
    for (const auto& entry : db) {
      const std::string key = entry.key().isString() ? "\"" + entry.key().toStringRef() + "\"" : entry.key().tagKind();
      auto it = da.find(entry.key());
      if (it == da.end()) { leaf.path = path + "[" + key + "]"; mismatch("key missing"); continue; }
      compareInto(it->value(), entry.value(), path + "[" + key + "]", tol, out);
    }
    return;
  }
  if (a.tagKind() != b.tagKind()) return mismatch(a.tagKind() + " vs reference " + b.tagKind());
  leaf.bitwiseEqual = a == b;
  if (!leaf.bitwiseEqual) { leaf.problem = "values differ"; leaf.mismatchFraction = 1; }
  out.push_back(leaf);
}

}  // namespace

bool Comparison::bitwiseEqual() const {
  for (const auto& l : leaves)
    if (!l.structureOk || !l.bitwiseEqual) return false;
  return true;
}

bool Comparison::withinTolerance() const {
  for (const auto& l : leaves)
    if (!l.structureOk || l.mismatchFraction > 0 || (!l.problem.empty() && !l.bitwiseEqual)) return false;
  return true;
}

std::string Comparison::summary() const {
  std::string out;
  for (const auto& l : leaves) {
    if (!l.structureOk) out += fmt::format("{}: structure differs: {}\n", l.path, l.problem);
    else out += fmt::format("{}: {} max_abs={:.3g} max_rel={:.3g} mismatch={:.4g}% cosine={:.6f}{}\n", l.path,
                            l.bitwiseEqual ? "bitwise-equal" : "differs", l.maxAbs, l.maxRel,
                            100 * l.mismatchFraction, l.cosine, l.problem.empty() ? "" : " (" + l.problem + ")");
  }
  return out;
}

Comparison compareOutputs(const c10::IValue& actual, const c10::IValue& expected, const Tolerance& tol) {
  Comparison c;
  compareInto(actual, expected, "out", tol, c.leaves);
  return c;
}

}  // namespace ptopt::verify
