// The Q/DQ operators of PyTorch's PT2E int8 form (see qdq_ops.h).
#include "ir/qdq_ops.h"

#include "ir/op_views.h"
#include "ir/rewriter.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <map>
#include <stdexcept>

namespace ptopt::ir {

namespace {

using Stack = std::vector<c10::IValue>;

void checkDtype(const at::Tensor& input, c10::ScalarType dtype, const char* op) {
  if (input.scalar_type() != dtype)
    throw std::invalid_argument(std::string("quantized_decomposed::") + op + ": expected an input of dtype " +
                                c10::toString(dtype) + ", got " + c10::toString(input.scalar_type()));
}

c10::ScalarType outDtype(const c10::IValue& v) { return v.isNone() ? at::kFloat : v.toScalarType(); }

// clamp(round(input * (1 / scale)) + zero_point, quant_min, quant_max).to(dtype)
Stack quantizePerTensor(Stack& a) {
  at::Tensor input = a[0].toTensor();
  if (input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16) input = input.to(at::kFloat);
  checkDtype(input, at::kFloat, "quantize_per_tensor");
  const double invScale = 1.0 / a[1].toDouble();
  at::Tensor q = at::clamp(at::round(input * invScale) + a[2].toInt(), a[3].toInt(), a[4].toInt());
  return {q.to(a[5].toScalarType())};
}

// (input.to(out_dtype) - zero_point) * scale
Stack dequantizePerTensor(Stack& a) {
  const at::Tensor& input = a[0].toTensor();
  checkDtype(input, a[5].toScalarType(), "dequantize_per_tensor");
  return {(input.to(outDtype(a[6])) - a[2].toInt()) * a[1].toDouble()};
}

// Per channel along `axis`: ((input - zero_points) * scales).to(out_dtype),
// computed with the channel axis moved first, as _decomposed.py does.
Stack dequantizePerChannel(Stack& a) {
  const at::Tensor& given = a[0].toTensor();
  checkDtype(given, a[6].toScalarType(), "dequantize_per_channel");
  const int64_t axis = a[3].toInt();
  if (axis < 0 || axis >= given.dim())
    throw std::invalid_argument("quantized_decomposed::dequantize_per_channel: axis " + std::to_string(axis) +
                                " is outside the input's " + std::to_string(given.dim()) + " dimensions");
  std::vector<int64_t> order(given.dim());
  for (int64_t i = 0; i < given.dim(); ++i) order[i] = i;
  std::swap(order[0], order[axis]);
  const at::Tensor input = given.permute(order);
  std::vector<int64_t> shape(input.dim(), 1);
  const at::Tensor scales = a[1].toTensor();
  shape[0] = scales.size(0);
  at::Tensor res = a[2].isNone() ? input * scales.view(shape)
                                 : (input - a[2].toTensor().view(shape)) * scales.view(shape);
  return {res.to(outDtype(a[7])).permute(order)};
}

struct Entry {
  const char* schema;
  QdqKernel kernel;
};

const std::map<std::string, Entry>& entries() {
  static const std::map<std::string, Entry> table = {
      {"quantize_per_tensor",
       {"quantized_decomposed::quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
        "int quant_max, ScalarType dtype) -> Tensor",
        quantizePerTensor}},
      {"dequantize_per_tensor",
       {"quantized_decomposed::dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, "
        "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
        dequantizePerTensor}},
      {"dequantize_per_channel",
       {"quantized_decomposed::dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, "
        "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
        dequantizePerChannel}},
  };
  return table;
}

const Entry* find(const std::string& target, const std::string& overload) {
  const std::string prefix = std::string(kQdqNamespace) + "::";
  if (!overload.empty() || target.rfind(prefix, 0) != 0) return nullptr;
  auto it = entries().find(target.substr(prefix.size()));
  return it == entries().end() ? nullptr : &it->second;
}

}  // namespace

const c10::FunctionSchema* qdqSchema(const std::string& target, const std::string& overload) {
  // Parsed once: immutable after, like the operator tables it stands in for.
  static const std::map<std::string, c10::FunctionSchema> parsed = [] {
    std::map<std::string, c10::FunctionSchema> out;
    for (const auto& [name, e] : entries()) out.emplace(name, torch::jit::parseSchema(e.schema));
    return out;
  }();
  if (!find(target, overload)) return nullptr;
  return &parsed.at(target.substr(target.find("::") + 2));
}

QdqKernel qdqKernel(const std::string& target, const std::string& overload) {
  const Entry* e = find(target, overload);
  return e ? e->kernel : nullptr;
}

namespace {

bool isUnregisteredQdq(const Node* n) {
  if (!n->isCall() || !qdqKernel(n->target(), n->overload())) return false;
  return n->schema() == qdqSchema(n->target(), n->overload());  // not an operator's own schema
}

[[noreturn]] void cannotDecompose(const Node* n, const std::string& why) {
  throw std::invalid_argument("cannot run " + n->qualifiedTarget() + " producing %" + n->output()->name() +
                              " without torch.ao.quantization.fx._decomposed: " + why);
}

// The ATen ops of one Q/DQ node, inserted before it; its replacement.
Value* decompose(Rewriter& rw, Node* n) {
  const OpView v = OpView::of(n);
  auto constant = [&](const std::string& name) {
    if (!v.arg(name).isLiteral()) cannotDecompose(n, "its " + name + " is not a constant");
    return v.arg(name).literal();
  };
  auto outDtype = [&]() {
    const Literal& l = constant("out_dtype");
    return l.isNone() ? Literal(c10::ScalarType::Float) : l;
  };
  auto to = [&](Value* x, const Literal& dtype) {
    return rw.call(n, "aten::to.dtype", {x, dtype, false, false, Literal()});
  };
  Value* input = v.value("input");
  if (n->target() == std::string(kQdqNamespace) + "::quantize_per_tensor") {
    auto scale = v.floatArg("scale");
    if (!scale) cannotDecompose(n, "its scale is not a constant");
    // Half and bfloat16 inputs are quantized from float; `to` returns a
    // float input itself.
    Value* x = to(input, Literal(c10::ScalarType::Float));
    Value* scaled = rw.call(n, "aten::mul.Scalar", {x, 1.0 / *scale});
    Value* shifted = rw.call(n, "aten::add.Scalar", {rw.call(n, "aten::round", {scaled}), constant("zero_point"), int64_t(1)});
    Value* clamped = rw.call(n, "aten::clamp", {shifted, constant("quant_min"), constant("quant_max")});
    return to(clamped, constant("dtype"));
  }
  if (n->target() == std::string(kQdqNamespace) + "::dequantize_per_tensor") {
    Value* shifted = rw.call(n, "aten::sub.Scalar", {to(input, outDtype()), constant("zero_point"), int64_t(1)});
    return rw.call(n, "aten::mul.Scalar", {shifted, constant("scale")});
  }
  // dequantize_per_channel: the channel axis first, as _decomposed.py does.
  const auto axis = v.intArg("axis");
  std::optional<size_t> rank;
  if (input->meta().shape) rank = input->meta().shape->size();
  else if (input->node() && input->node()->opcode() == Opcode::GetAttr)  // a weight: the constant's
    if (const c10::IValue& c = rw.graph().constants().at(input->node()->target()); c.isTensor()) rank = c.toTensor().dim();
  if (!axis || !rank) cannotDecompose(n, "its axis or its input's rank is not known");
  std::vector<int64_t> order(*rank), shape(*rank, 1);
  for (size_t i = 0; i < *rank; ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[0], order[*axis]);
  shape[0] = -1;
  Value* permuted = rw.call(n, "aten::permute", {input, order});
  Value* scales = rw.call(n, "aten::view", {v.value("scales"), shape});
  Value* res;
  if (v.isNone("zero_points")) {
    res = rw.call(n, "aten::mul.Tensor", {permuted, scales});
  } else {
    Value* zps = rw.call(n, "aten::view", {v.value("zero_points"), shape});
    res = rw.call(n, "aten::mul.Tensor", {rw.call(n, "aten::sub.Tensor", {permuted, zps, int64_t(1)}), scales});
  }
  return rw.call(n, "aten::permute", {to(res, outDtype()), order});
}

}  // namespace

bool hasUnregisteredQdqOps(const Model& m) {
  bool found = false;
  for (const auto& [name, graph] : m.methods) graph->walk([&](Node* n) { found = found || isUnregisteredQdq(n); });
  return found;
}

void decomposeQdqOps(Model& m) {
  for (const auto& [name, graph] : m.methods) {
    Rewriter rw(*graph, nullptr, "decompose-qdq");
    std::vector<Node*> nodes;
    graph->walk([&](Node* n) {
      if (isUnregisteredQdq(n)) nodes.push_back(n);
    });
    for (Node* n : nodes) {
      Value* with = decompose(rw, n);
      rw.setMeta(with, n->output()->meta());
      rw.replace(n, with);
    }
  }
}

}  // namespace ptopt::ir
