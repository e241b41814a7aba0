// Kernel probes: whether this LibTorch's kernels accept an operator in a
// given form, learned by running it once on a tiny example (never by the
// version number), memoized per key under one lock (passes may run on
// several threads: the Python package releases the GIL around a run).
//
// Every probe of a kernel lives here, so that a pass asks target/ what the
// machine and its LibTorch can do, and the answers are cached in one place.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace ptopt::target {

// Whether a transposed conv of `rank` (1, 2, 3) spatial dims runs on the CPU
// in `dtype` and gives the fp32 result (LibTorch 1.13 has no bf16 or fp16
// transposed conv on the CPU: bf16 fails a shape check).
bool cpuRunsTransposedConv(int64_t rank, c10::ScalarType dtype);

// Whether aten::_add_relu's CPU kernel accepts `dtype` (LibTorch 1.13
// rejects bf16 and fp16 with an internal assert).
bool cpuAddReluRuns(c10::ScalarType dtype);

// Whether oneDNN's linear (mkldnn::_linear_pointwise on a weight packed by
// mkldnn::_reorder_linear_weight) runs in `dtype` on this CPU and gives the
// fp32 result: probed once per dtype with a tiny linear. False where this
// LibTorch has no such operator, and where this CPU's oneDNN has no kernel
// for the dtype ("could not create a primitive descriptor": bf16 on some
// AVX2-only CPUs).
bool cpuOneDnnLinearRuns(c10::ScalarType dtype);

// The forms in which ptopt runs a conv on oneDNN (each its own operators, so
// each its own probe).
enum class OneDnnConv {
  Dense,      // aten::mkldnn_convolution on strided tensors (tuned-kernels mkldnn=)
  Blocked,    // the same on oneDNN tensors with a reordered weight (onednn-blocked)
  Prepacked,  // mkldnn_prepacked::conv2d_prepack + conv2d_run (tuned-kernels prepacked=)
  Fused,      // mkldnn::_convolution_pointwise on a reordered weight (tuned-kernels fused=)
};
// Whether a tiny conv in that form runs on this CPU in `dtype` and gives the
// fp32 result: probed once per form and dtype. False where this LibTorch has
// no such operator, and where this CPU's oneDNN has no kernel for the dtype
// (bf16 on an AVX2-only CPU: "bf16 path needs the cpu support avx_ne_convert
// or avx512bw, avx512vl and avx512dq").
bool cpuOneDnnConvRuns(OneDnnConv form, c10::ScalarType dtype);
// "" when it runs, else the reason a pass declines with.
std::string oneDnnConvMissing(OneDnnConv form, c10::ScalarType dtype);

// Whether the target computes a conv kind in channels-last when input and
// weight are channels-last (rank 4 or 5, transposed or not). CPU: probed
// once per kind with a tiny conv on this LibTorch (1.13 does conv2d only;
// the ISA plays no part). CUDA: cuDNN does every kind (probed on the device
// when CUDA is available here, else by that rule, without touching the
// CPU). `why` gets one line when false.
bool convRunsChannelsLast(const std::string& targetDevice, bool transposed, int64_t rank, std::string* why = nullptr);

// Whether this LibTorch's XNNPACK convs run here: prepacked::conv2d_clamp_prepack
// and conv2d_clamp_run exist (Debian's 1.13 has them; PyPI's x86 wheels are
// built without XNNPACK) and give conv2d's result with the clamp applied.
bool xnnpackConvRuns();

// Whether silu in `dtype` (bf16 or fp16) runs on this CPU, with this
// LibTorch, at least as fast as fp32 silu with the two casts an fp32 silu
// between low-precision neighbours needs. Timed once per process and dtype
// (the best of 15 runs of each on a 1x32x112x112 tensor, at the current
// thread count): the one probe here that measures, because the answer is
// the kernels' speed. LibTorch 1.13's bf16 silu converts element by element
// (1.9 ms against 1.2 ms for fp32 with the casts, here); 2.15's is
// vectorized (0.56 ms against 0.95). False when the dtype does not run.
bool cpuLowPrecisionSiluPays(c10::ScalarType dtype);

// Whether oneDNN's int8 conv with a fused activation runs on this CPU:
// onednn::qconv_prepack of a tiny int8 weight, then
// onednn::qconv2d_pointwise with the "swish" post-op, uint8 in and out,
// against the same conv computed in float (within one quantization step).
// "" when it runs, else the reason a pass declines with: this LibTorch has
// no such operator (1.13), or oneDNN failed here (its message).
std::string oneDnnInt8ConvMissing();

}  // namespace ptopt::target
