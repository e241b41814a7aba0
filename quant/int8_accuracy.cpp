#include "quant/int8_accuracy.h"

#include "ir/interpreter.h"
#include "ir/model.h"
#include "quant/int8_rewrite.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <unordered_map>

namespace ptopt::quant {

namespace {

// Float tensors of an output value, flattened out of tuples and lists.
void floatTensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    if (at::isFloatingType(v.toTensor().scalar_type())) out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) floatTensors(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) floatTensors(e, out);
  }
}

double cosine(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.detach().to(at::kDouble).reshape({-1}), y = b.detach().to(at::kDouble).reshape({-1});
  const double nx = x.norm().item<double>(), ny = y.norm().item<double>();
  if (nx == 0 && ny == 0) return 1.0;
  if (nx == 0 || ny == 0) return 0.0;
  return (x * y).sum().item<double>() / (nx * ny);
}

}  // namespace

Evaluation evaluateInt8(const ir::Graph& g, const std::set<size_t>& fp32, const std::map<std::string, QParams>& qparams,
                    const std::vector<std::vector<c10::IValue>>& batches, bool dynamic, bool reduceRange,
                    RnnWeights rnnWeights) {
  Evaluation ev;
  auto constants = std::make_shared<ir::ConstantTable>(g.constants());
  auto copy = ir::cloneGraph(g, constants);
  auto cands = findInt8Candidates(*copy, dynamic, nullptr, "");
  auto origCands = findInt8Candidates(const_cast<ir::Graph&>(g), dynamic, nullptr, "");
  // Names the comparison needs: candidate outputs and inputs.
  std::set<std::string> wanted;
  for (const auto& c : origCands) {
    wanted.insert(c.out->name());
    for (ir::Value* x : tensorInputs(c)) wanted.insert(x->name());
  }
  BuildResult built = buildInt8(*copy, cands, fp32, qparams, nullptr, "quantize", reduceRange, rnnWeights);
  std::unordered_map<const ir::Value*, std::string> quantizedNames;
  for (const auto& [name, v] : built.quantizedByName) quantizedNames[v] = name;
  for (const auto& [idx, v] : built.quantizedOut) {
    quantizedNames[v] = origCands[idx].out->name();
    ev.quantized.insert(idx);
  }
  std::map<std::string, std::pair<double, double>> power;  // name -> (signal, noise)
  double worstCos = 1;
  int64_t agree = 0, rows = 0;
  try {
    for (const auto& batch : batches) {
      std::unordered_map<std::string, at::Tensor> fp;
      ir::InterpreterOptions o;
      o.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        if (iv.isTensor() && wanted.count(v.name()) && v.owningBlock() == g.block()) fp[v.name()] = iv.toTensor().clone();  // in-place ops may write it later
      };
      ir::Interpreter refObs(g, o);
      auto refOut = refObs.run(batch);
      ir::InterpreterOptions qo;
      qo.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        auto it = quantizedNames.find(&v);
        if (it == quantizedNames.end() || !iv.isTensor()) return;
        auto f = fp.find(it->second);
        if (f == fp.end()) return;
        at::Tensor deq = iv.toTensor().is_quantized() ? iv.toTensor().dequantize() : iv.toTensor();
        at::Tensor r = f->second.detach().to(at::kDouble), d = deq.to(at::kDouble);
        auto& p = power[it->second];
        p.first += r.pow(2).sum().item<double>();
        p.second += (r - d).pow(2).sum().item<double>();
      };
      ir::Interpreter q(*copy, qo);
      auto qOut = q.run(batch);
      // Entries: the quantization of float inputs itself.
      for (size_t i = 0; i < origCands.size(); ++i) {
        if (fp32.count(i) || dynamic || origCands[i].kind == Int8Kind::Rnn) continue;  // quantized per call
        for (ir::Value* x : tensorInputs(origCands[i])) {
          if (built.quantizedByName.count(x->name())) continue;
          auto f = fp.find(x->name());
          auto qpIt = qparams.find(x->name());
          if (f == fp.end() || qpIt == qparams.end()) continue;
          at::Tensor r = f->second.detach().to(at::kFloat);
          at::Tensor d = at::quantize_per_tensor(r, qpIt->second.scale, qpIt->second.zeroPoint, at::kQUInt8).dequantize();
          auto& p = power["entry:" + x->name()];
          p.first += r.to(at::kDouble).pow(2).sum().item<double>();
          p.second += (r.to(at::kDouble) - d.to(at::kDouble)).pow(2).sum().item<double>();
        }
      }
      std::vector<at::Tensor> a, b;
      for (const auto& v : refOut) floatTensors(v, a);
      for (const auto& v : qOut) floatTensors(v, b);
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        at::Tensor bq = b[i].is_quantized() ? b[i].dequantize() : b[i];
        worstCos = std::min(worstCos, cosine(a[i], bq));
        if (a[i].dim() == 2 && a[i].size(1) > 1) {
          agree += a[i].argmax(1).eq(bq.argmax(1)).sum().item<int64_t>();
          rows += a[i].size(0);
        }
      }
    }
  } catch (const std::exception& e) {
    ev.error = ir::torchErrorMessage(e);
    ev.cosine = -1;
    return ev;
  }
  auto db = [](const std::pair<double, double>& p) {
    if (p.second <= 0) return std::numeric_limits<double>::infinity();
    if (p.first <= 0) return -std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(p.first / p.second);
  };
  for (size_t i = 0; i < origCands.size(); ++i) {
    auto it = power.find(origCands[i].out->name());
    if (it != power.end()) ev.sqnr[i] = db(it->second);
    double in = std::numeric_limits<double>::infinity();
    for (ir::Value* x : tensorInputs(origCands[i])) {
      auto p = power.find(x->name());
      if (p == power.end()) p = power.find("entry:" + x->name());
      if (p != power.end()) in = std::min(in, db(p->second));
    }
    ev.inSqnr[i] = in;
  }
  ev.cosine = worstCos;
  if (rows > 0) ev.top1 = static_cast<double>(agree) / static_cast<double>(rows);
  return ev;
}

}  // namespace ptopt::quant
