#include "verify/fp64_reference.h"

#include "ir/interpreter.h"
#include "ir/text.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ptopt::verify {

c10::IValue castFloatTensors(const c10::IValue& v, at::ScalarType from, at::ScalarType to) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() && t.scalar_type() == from ? c10::IValue(t.to(to)) : v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector())
      out.push_back(t.defined() && t.scalar_type() == from ? t.to(to) : t);
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> elems;
    for (const auto& e : v.toTupleRef().elements()) elems.push_back(castFloatTensors(e, from, to));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const auto& e : v.toListRef()) out.push_back(castFloatTensors(e, from, to));
    return out;
  }
  if (v.isGenericDict()) {
    auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& e : d) out.insert(e.key(), castFloatTensors(e.value(), from, to));
    return out;
  }
  return v;
}

namespace {

std::vector<c10::IValue> castAll(std::vector<c10::IValue> values, at::ScalarType from, at::ScalarType to) {
  for (auto& v : values) v = castFloatTensors(v, from, to);
  return values;
}

// Whether `v` holds a float32 tensor (inside lists, tuples and dicts too).
bool holdsFloat32(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().scalar_type() == at::kFloat;
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector())
      if (t.defined() && t.scalar_type() == at::kFloat) return true;
    return false;
  }
  if (v.isTuple()) {
    const auto& elems = v.toTupleRef().elements();
    return std::any_of(elems.begin(), elems.end(), holdsFloat32);
  }
  if (v.isList()) {
    for (const auto& e : v.toListRef())
      if (holdsFloat32(e)) return true;
    return false;
  }
  if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict())
      if (holdsFloat32(e.value())) return true;
  }
  return false;
}

}  // namespace

struct Fp64Reference::Impl {
  ir::Model model;
  c10::Device device;
  std::unique_ptr<ir::Interpreter> interpreter;
};

namespace {
// `t` (float32) in float64, moved by a uniform draw within half its float32
// ulp.
at::Tensor perturbedWithinHalfUlp(const at::Tensor& t, at::Generator& gen) {
  const at::Tensor up = at::nextafter(t, at::full_like(t, INFINITY));
  const at::Tensor ulp = (up.to(at::kDouble) - t.to(at::kDouble)).abs();
  const at::Tensor u = at::rand(t.sizes(), gen, at::TensorOptions().dtype(at::kDouble)) - 0.5;
  return t.to(at::kDouble) + u * ulp;
}
}  // namespace

Fp64Reference::Fp64Reference(const torch::jit::Module& reference, c10::Device device,
                             std::optional<uint64_t> perturbSeed)
    : impl_(std::make_unique<Impl>(Impl{ir::Model{}, device, nullptr})) {
  try {
    impl_->model = ir::importModule(reference);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the original cannot be imported to run in float64: ") +
                             ir::torchErrorMessage(e));
  }
  // A table of its own: the import shares the module's tensors.
  ir::ConstantTable& table = *impl_->model.constants;
  std::vector<std::pair<std::string, c10::IValue>> converted;
  std::optional<at::Generator> gen;
  if (perturbSeed) gen = at::make_generator<at::CPUGeneratorImpl>(*perturbSeed);
  for (const auto& [name, value] : table.entries()) {
    const bool perturb = gen && value.isTensor() && value.toTensor().scalar_type() == at::kFloat &&
                         value.toTensor().device().is_cpu();
    c10::IValue v = perturb ? c10::IValue(perturbedWithinHalfUlp(value.toTensor(), *gen))
                            : castFloatTensors(value, at::kFloat, at::kDouble);
    converted.emplace_back(name, v.isTensor() ? c10::IValue(v.toTensor().to(device)) : v);
  }
  for (auto& [name, value] : converted) table.set(name, std::move(value));

  ir::InterpreterOptions options;
  options.call = [this](const ir::Node& n, std::vector<c10::IValue> args, const ir::NodeRun& run) {
    try {
      return run(args);
    } catch (const std::exception&) {
    }
    // A float32 tensor the graph made meets float64 ones: all in float64.
    if (std::any_of(args.begin(), args.end(), holdsFloat32)) {
      try {
        return run(castAll(args, at::kFloat, at::kDouble));
      } catch (const std::exception&) {
      }
    }
    // No float64 kernel: this operator in float32, its results in float64.
    const std::string what = "`" + ir::printNode(n) + "`";
    if (std::find(keptFp32_.begin(), keptFp32_.end(), what) == keptFp32_.end()) keptFp32_.push_back(what);
    return castAll(run(castAll(std::move(args), at::kDouble, at::kFloat)), at::kFloat, at::kDouble);
  };
  impl_->interpreter = std::make_unique<ir::Interpreter>(impl_->model.forward(), std::move(options));
}

Fp64Reference::~Fp64Reference() = default;

c10::IValue Fp64Reference::run(const std::vector<c10::IValue>& inputs, uint64_t seed) {
  std::vector<c10::IValue> in;
  for (const auto& v : inputs) {
    c10::IValue d = castFloatTensors(v, at::kFloat, at::kDouble);
    in.push_back(d.isTensor() ? c10::IValue(d.toTensor().to(impl_->device)) : d);
  }
  torch::NoGradGuard noGrad;
  torch::manual_seed(seed);
  try {
    return impl_->interpreter->runMethod(std::move(in));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the original fails in float64: ") + ir::torchErrorMessage(e));
  }
}

}  // namespace ptopt::verify
