/* cpuinfo_avx2_cap.c: caps what the cpuinfo library reports to AVX2, for
 * measuring the AVX2 world on an AVX-512 machine.
 *
 * ATEN_CPU_CAPABILITY=avx2 caps ATen's kernels and ONEDNN_MAX_CPU_ISA=AVX2
 * oneDNN's, but libraries that ask cpuinfo (XNNPACK, in this LibTorch
 * `prepacked::conv2d_clamp_run` and `linear_clamp_run`) still pick their
 * AVX-512 kernels. Preloaded, this library initializes cpuinfo once and
 * clears its AVX-512 flags before anything reads them (cpuinfo initializes
 * only once, and its `cpuinfo_has_x86_*` queries read these flags).
 *
 * Needs libcpuinfo-dev (Debian) and a LibTorch linked against the shared
 * libcpuinfo.so.0, as Debian's is:
 *   gcc -O2 -shared -fPIC bench/cpuinfo_avx2_cap.c -o /tmp/libcpuinfo_avx2_cap.so -lcpuinfo
 *   ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
 *     LD_PRELOAD=/tmp/libcpuinfo_avx2_cap.so CPUINFO_CAP_VERBOSE=1 python3 ...
 * ptopt emits no XNNPACK ops, so its own numbers do not depend on this; it
 * was used to measure XNNPACK as a candidate (docs/benchmarks.md).
 */
#include <cpuinfo.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void cap_cpuinfo_to_avx2(void) {
  if (!cpuinfo_initialize()) return;
  struct cpuinfo_x86_isa* isa = &cpuinfo_isa;
  isa->avx512f = isa->avx512pf = isa->avx512er = isa->avx512cd = false;
  isa->avx512dq = isa->avx512bw = isa->avx512vl = isa->avx512ifma = false;
  isa->avx512vbmi = isa->avx512vbmi2 = isa->avx512bitalg = isa->avx512vpopcntdq = false;
  isa->avx512vnni = isa->avx512bf16 = isa->avx512vp2intersect = false;
  isa->avx512_4vnniw = isa->avx512_4fmaps = false;
  if (getenv("CPUINFO_CAP_VERBOSE")) fprintf(stderr, "cpuinfo: AVX-512 flags cleared (AVX2 world)\n");
}
