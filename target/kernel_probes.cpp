#include "target/kernel_probes.h"

#include "ir/literal.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace ptopt::target {

namespace {

// The one memo of every probe: key -> answer, under one lock. A probe that
// throws answers false (the kernel does not run in that form).
using ProbeKey = std::tuple<std::string, int64_t, int64_t, int64_t>;  // probe, and up to three parameters

bool probeOnce(const ProbeKey& key, const std::function<bool()>& probe) {
  static std::mutex mutex;
  static std::map<ProbeKey, bool> answers;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = answers.find(key); it != answers.end()) return it->second;
  bool ok = false;
  try {
    at::NoGradGuard noGrad;
    ok = probe();
  } catch (const std::exception&) {
    ok = false;
  }
  return answers[key] = ok;
}

}  // namespace

bool cpuRunsTransposedConv(int64_t rank, c10::ScalarType dtype) {
  return probeOnce({"conv_transpose", rank, static_cast<int64_t>(dtype), 0}, [rank, dtype] {
    // 2 channels in, 3 out: a square weight would pass the buggy check.
    std::vector<int64_t> x{1, 2}, w{2, 3};
    for (int64_t d = 0; d < rank; ++d) x.push_back(4), w.push_back(3);
    auto run = [rank](const at::Tensor& xt, const at::Tensor& wt) {
      return rank == 1 ? at::conv_transpose1d(xt, wt) : rank == 2 ? at::conv_transpose2d(xt, wt) : at::conv_transpose3d(xt, wt);
    };
    const at::Tensor xt = at::ones(x), wt = at::ones(w);
    const at::Tensor expected = run(xt, wt);
    const at::Tensor y = run(xt.to(dtype), wt.to(dtype));
    return y.scalar_type() == dtype && y.sizes() == expected.sizes() && at::allclose(y.to(at::kFloat), expected);
  });
}

bool cpuAddReluRuns(c10::ScalarType dtype) {
  return probeOnce({"add_relu", static_cast<int64_t>(dtype), 0, 0}, [dtype] {
    const at::Tensor a = at::full({2}, -1.0, at::TensorOptions().dtype(dtype));
    const at::Tensor b = at::full({2}, 3.0, at::TensorOptions().dtype(dtype));
    return at::_add_relu(a, b).to(at::kFloat).equal(at::full({2}, 2.0));
  });
}

bool cpuOneDnnLinearRuns(c10::ScalarType dtype) {
  return probeOnce({"onednn_linear", static_cast<int64_t>(dtype), 0, 0}, [dtype] {
    auto& dispatcher = c10::Dispatcher::singleton();
    const auto reorder = dispatcher.findSchema({"mkldnn::_reorder_linear_weight", ""});
    const auto linear = dispatcher.findSchema({"mkldnn::_linear_pointwise", ""});
    if (!reorder || !linear) return false;
    const at::TensorOptions options = at::TensorOptions().dtype(dtype);
    const at::Tensor x = at::ones({3, 4}, options), w = at::ones({5, 4}, options), b = at::ones({5}, options);
    torch::jit::Stack stack{c10::IValue(w), c10::IValue(int64_t{3})};
    reorder->callBoxed(&stack);
    c10::impl::GenericList noScalars(c10::OptionalType::create(c10::NumberType::get()));
    stack = {c10::IValue(x), stack.at(0), c10::IValue(b), c10::IValue(std::string("none")), c10::IValue(noScalars),
             c10::IValue()};
    linear->callBoxed(&stack);
    const at::Tensor y = stack.at(0).toTensor();
    return y.scalar_type() == dtype && y.sizes() == at::IntArrayRef({3, 5}) &&
           y.to(at::kFloat).equal(at::full({3, 5}, 5.0));
  });
}

namespace {

// Operator `op` called boxed on `args`, fitted to this LibTorch's schema
// (the trailing optional arguments differ between versions: 1.13's
// mkldnn_reorder_conv2d_weight has no input_size): arguments it lacks are
// dropped, the defaults of those it has beyond `args` added; its first result.
c10::IValue callWithDefaults(const char* op, const char* overload, std::vector<c10::IValue> args) {
  const auto handle = c10::Dispatcher::singleton().findSchema({op, overload});
  if (!handle) throw std::runtime_error(std::string("this LibTorch has no ") + op);
  const auto& formals = handle->schema().arguments();
  if (args.size() > formals.size()) args.resize(formals.size());
  for (size_t i = args.size(); i < formals.size(); ++i) {
    if (!formals[i].default_value()) throw std::runtime_error(std::string(op) + ": an argument without a default");
    args.push_back(*formals[i].default_value());
  }
  torch::jit::Stack stack(args.begin(), args.end());
  handle->callBoxed(&stack);
  return stack.at(0);
}

const char* oneDnnConvOperator(OneDnnConv form) {
  switch (form) {
    case OneDnnConv::Dense: return "aten::mkldnn_convolution";
    case OneDnnConv::Blocked: return "aten::mkldnn_convolution on oneDNN tensors";
    case OneDnnConv::Prepacked: return "mkldnn_prepacked::conv2d_run";
    case OneDnnConv::Fused: return "mkldnn::_convolution_pointwise";
  }
  return "";
}

}  // namespace

bool cpuOneDnnConvRuns(OneDnnConv form, c10::ScalarType dtype) {
  return probeOnce({"onednn_conv", static_cast<int64_t>(form), static_cast<int64_t>(dtype), 0}, [form, dtype] {
    // [1, 2, 5, 5] * [3, 2, 3, 3] of ones, bias 1: every output is 2*9 + 1 = 19
    // (exact in bf16).
    const at::TensorOptions options = at::TensorOptions().dtype(dtype);
    const at::Tensor x = at::ones({1, 2, 5, 5}, options), w = at::ones({3, 2, 3, 3}, options), b = at::ones({3}, options);
    const c10::IValue padding(std::vector<int64_t>{0, 0}), unit(std::vector<int64_t>{1, 1}), groups(int64_t{1});
    const c10::IValue inputSize(x.sizes().vec());
    auto reordered = [&] {
      const c10::IValue wm = callWithDefaults("aten::to_mkldnn", "", {w});
      return callWithDefaults("aten::mkldnn_reorder_conv2d_weight", "", {wm, padding, unit, unit, groups, inputSize});
    };
    at::Tensor y;
    switch (form) {
      case OneDnnConv::Dense:
        y = callWithDefaults("aten::mkldnn_convolution", "", {x, w, b, padding, unit, unit, groups}).toTensor();
        break;
      case OneDnnConv::Blocked: {
        const c10::IValue xm = callWithDefaults("aten::to_mkldnn", "", {x});
        y = callWithDefaults("aten::mkldnn_convolution", "", {xm, reordered(), b, padding, unit, unit, groups}).toTensor();
        y = y.to_dense();
        break;
      }
      case OneDnnConv::Prepacked: {
        const c10::IValue context = callWithDefaults("mkldnn_prepacked::conv2d_prepack", "",
                                                     {w, b, unit, padding, unit, groups, inputSize, std::string("none")});
        y = callWithDefaults("mkldnn_prepacked::conv2d_run", "", {x, context}).toTensor();
        break;
      }
      case OneDnnConv::Fused: {
        const at::Tensor xcl = x.contiguous(c10::MemoryFormat::ChannelsLast);
        c10::impl::GenericList noScalars(c10::OptionalType::create(c10::NumberType::get()));
        y = callWithDefaults("mkldnn::_convolution_pointwise", "",
                             {xcl, reordered(), b, padding, unit, unit, groups, std::string("none"), noScalars,
                              c10::IValue()})
                .toTensor();
        break;
      }
    }
    return y.scalar_type() == dtype && y.sizes() == at::IntArrayRef({1, 3, 3, 3}) &&
           y.to(at::kFloat).equal(at::full({1, 3, 3, 3}, 19.0));
  });
}

std::string oneDnnConvMissing(OneDnnConv form, c10::ScalarType dtype) {
  if (cpuOneDnnConvRuns(form, dtype)) return "";
  return "this CPU's oneDNN has no " + ir::dtypeName(dtype) + " conv as " + oneDnnConvOperator(form) +
         " (probed)";
}

bool convRunsChannelsLast(const std::string& targetDevice, bool transposed, int64_t rank, std::string* why) {
  const bool cuda = targetDevice == "cuda";
  if (cuda && !torch::cuda::is_available()) return true;  // cuDNN 8 computes every conv kind in channels-last
  const bool ok = probeOnce({"conv_channels_last", cuda, transposed, rank}, [cuda, transposed, rank] {
    const auto format = rank == 5 ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
    std::vector<int64_t> shape = {1, 4, 6, 6}, kernel = {4, 4, 3, 3};
    if (rank == 5) {
      shape.push_back(6);
      kernel.push_back(3);
    }
    const auto options = at::TensorOptions().device(cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU));
    at::Tensor x = at::ones(shape, options).contiguous(format);  // not randn: the global RNG stays untouched
    at::Tensor w = at::ones(kernel, options).contiguous(format);
    at::Tensor y;
    if (rank == 4) y = transposed ? at::conv_transpose2d(x, w) : at::conv2d(x, w);
    else y = transposed ? at::conv_transpose3d(x, w) : at::conv3d(x, w);
    return y.is_contiguous(format) && !y.is_contiguous();
  });
  if (!ok && why)
    *why = cuda ? "cuDNN on this device computes this conv kind in the contiguous format only (probed)"
                : "this LibTorch computes this conv kind in the contiguous format only on a CPU (probed)";
  return ok;
}

bool xnnpackConvRuns() {
  return probeOnce({"xnnpack_conv", 0, 0, 0}, [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    const auto prepack = dispatcher.findSchema({"prepacked::conv2d_clamp_prepack", ""});
    const auto run = dispatcher.findSchema({"prepacked::conv2d_clamp_run", ""});
    if (!prepack || !run) return false;
    const at::Tensor x = at::linspace(-1, 1, 2 * 5 * 5).reshape({1, 2, 5, 5});
    const at::Tensor w = at::linspace(-1, 1, 3 * 2 * 3 * 3).reshape({3, 2, 3, 3});
    torch::jit::Stack stack{w, c10::IValue(), std::vector<int64_t>{1, 1}, std::vector<int64_t>{1, 1},
                            std::vector<int64_t>{1, 1}, int64_t{1}, c10::IValue(0.0), c10::IValue()};
    prepack->callBoxed(&stack);
    stack = {x, stack.at(0)};
    run->callBoxed(&stack);
    return at::allclose(stack.at(0).toTensor(), at::relu(at::conv2d(x, w, {}, 1, 1)), 1e-4, 1e-5);
  });
}

bool cpuLowPrecisionSiluPays(c10::ScalarType dtype) {
  return probeOnce({"lowp_silu", static_cast<int64_t>(dtype), 0, 0}, [dtype] {
    const at::Tensor x = at::randn({1, 32, 112, 112});
    const at::Tensor low = x.to(dtype);
    auto best = [](const std::function<void()>& f) {
      for (int i = 0; i < 3; ++i) f();
      double ms = std::numeric_limits<double>::infinity();
      for (int i = 0; i < 15; ++i) {
        const auto start = std::chrono::steady_clock::now();
        f();
        ms = std::min(ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      return ms;
    };
    const double lowMs = best([&] { at::silu(low); });
    const double fp32WithCastsMs = best([&] { at::silu(low.to(at::kFloat)).to(dtype); });
    return lowMs <= fp32WithCastsMs;
  });
}

std::string oneDnnInt8ConvMissing() {
  auto& dispatcher = c10::Dispatcher::singleton();
  if (!dispatcher.findSchema({"onednn::qconv_prepack", ""}) || !dispatcher.findSchema({"onednn::qconv2d_pointwise", ""}))
    return "this LibTorch has no onednn::qconv2d_pointwise (PyTorch 2.x has)";
  const bool runs = probeOnce({"onednn_qconv_swish", 0, 0, 0}, [&dispatcher] {
    const auto prepack = dispatcher.findSchema({"onednn::qconv_prepack", ""});
    const auto run = dispatcher.findSchema({"onednn::qconv2d_pointwise", ""});
    const double xs = 0.02, ys = 0.01;
    const int64_t xz = 100, yz = 20;
    const at::Tensor x = at::arange(2 * 5 * 5).remainder(200).to(at::kByte).reshape({1, 2, 5, 5})
                             .contiguous(c10::MemoryFormat::ChannelsLast);
    const at::Tensor w = (at::arange(3 * 2 * 3 * 3).remainder(11) - 5).to(at::kChar).reshape({3, 2, 3, 3});
    const at::Tensor ws = at::full({3}, 0.05), wz = at::zeros({3}, at::kLong), b = at::full({3}, 0.1);
    const std::vector<int64_t> one{1, 1};
    torch::jit::Stack stack{w, ws, xs, xz, one, one, one, int64_t{1}, c10::IValue()};
    prepack->callBoxed(&stack);
    c10::impl::GenericList noScalars(c10::OptionalType::create(c10::NumberType::get()));
    stack = {x, xs, xz, stack.at(0), ws, wz, b, one, one, one, int64_t{1}, ys, yz, c10::IValue(),
             std::string("swish"), noScalars, c10::IValue()};
    run->callBoxed(&stack);
    const at::Tensor y = stack.at(0).toTensor();
    const at::Tensor ref = at::silu(at::conv2d((x.to(at::kFloat) - xz) * xs, w.to(at::kFloat) * 0.05, b, 1, 1));
    const at::Tensor expected = at::clamp(at::round(ref / ys) + yz, 0, 255);
    return y.scalar_type() == at::kByte && y.sizes() == expected.sizes() &&
           (y.to(at::kFloat) - expected).abs().max().item<double>() <= 1.0;
  });
  return runs ? "" : "this CPU's oneDNN does not run onednn::qconv2d_pointwise (probed with a tiny int8 conv)";
}

}  // namespace ptopt::target
