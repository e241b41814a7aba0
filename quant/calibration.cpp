#include "quant/calibration.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <stdexcept>

namespace ptopt::quant {

namespace {
std::string shapeText(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}
}  // namespace

std::vector<std::vector<c10::IValue>> splitCalibrationBatches(const std::vector<c10::IValue>& values,
                                                              size_t numInputs,
                                                              const std::vector<c10::IValue>* expected,
                                                              const std::string& source) {
  // A file holding one list/tuple of batches arrives as that list's elements.
  std::vector<c10::IValue> items = values;
  if (items.size() == 1 && (items[0].isList() || items[0].isTuple())) {
    auto inner = items[0];
    items = inner.isList() ? inner.toListRef().vec() : inner.toTupleRef().elements().vec();
  }
  if (items.empty())
    throw std::invalid_argument(fmt::format("calibration file '{}' holds no batch (save a list of batches: "
                                            "torch.save([x1, x2, ...], FILE))", source));
  std::vector<std::vector<c10::IValue>> batches;
  for (size_t b = 0; b < items.size(); ++b) {
    std::vector<c10::IValue> batch;
    if (items[b].isTensor()) batch = {items[b]};
    else if (items[b].isTuple()) batch = items[b].toTupleRef().elements().vec();
    else if (items[b].isList()) batch = items[b].toListRef().vec();
    else
      throw std::invalid_argument(fmt::format("calibration file '{}': batch {} is a {}, not a tensor or a tuple of "
                                              "the model's inputs", source, b, items[b].tagKind()));
    if (batch.size() != numInputs)
      throw std::invalid_argument(fmt::format("calibration file '{}': batch {} holds {} input(s), the model takes {}",
                                              source, b, batch.size(), numInputs));
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].isTensor()) continue;
      const at::Tensor& t = batch[i].toTensor();
      if (t.numel() == 0)
        throw std::invalid_argument(fmt::format("calibration file '{}': input {} of batch {} is empty (shape {})",
                                                source, i, b, shapeText(t)));
      if (at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>())
        throw std::invalid_argument(fmt::format("calibration file '{}': input {} of batch {} holds NaN or Inf values",
                                                source, i, b));
      const at::Tensor* ref = nullptr;
      if (expected && i < expected->size() && (*expected)[i].isTensor()) ref = &(*expected)[i].toTensor();
      else if (b > 0 && batches[0][i].isTensor()) ref = &batches[0][i].toTensor();
      if (!ref) continue;
      bool ok = ref->dim() == t.dim();
      for (int64_t d = 1; ok && d < t.dim(); ++d) ok = ref->size(d) == t.size(d);
      if (!ok)
        throw std::invalid_argument(fmt::format(
            "calibration file '{}': input {} of batch {} has shape {}, expected {} (any batch size){}", source, i, b,
            shapeText(t), shapeText(*ref), expected ? " as --input-shape says" : " like batch 0"));
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

std::vector<std::vector<c10::IValue>> randomCalibrationBatches(const std::vector<c10::IValue>& example, size_t count,
                                                               uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<c10::IValue>> batches;
  for (size_t b = 0; b < count; ++b) {
    std::vector<c10::IValue> batch;
    for (const auto& v : example) {
      if (v.isTensor() && at::isFloatingType(v.toTensor().scalar_type())) {
        const at::Tensor& t = v.toTensor();
        batch.emplace_back(at::normal(0.0, 1.0, t.sizes(), gen, t.options()));
      } else {
        batch.push_back(v);
      }
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace ptopt::quant
