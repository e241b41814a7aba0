#!/usr/bin/env bash
# Runs a command in the AVX2 world on any x86 machine (docs/pytorch-worlds.md, "Tests on any
# CPU"): ATen's kernels and oneDNN capped to AVX2, and, where LibTorch reads
# the shared libcpuinfo (Debian's 1.13), cpuinfo's AVX-512 flags cleared by
# the preloaded bench/cpuinfo_avx2_cap.c, so that PyTorch's own CPUID checks
# (which kernel runs a bf16 conv, XNNPACK's kernels) answer as on an AVX2 CPU.
# PyTorch 2.x wheels link cpuinfo statically, but ask oneDNN, which honours
# its cap, whether bf16 runs there. ONEDNN_VERBOSE=1 shows the ISA oneDNN uses.
# The shim is for Debian's world only: preloaded into a wheel's process its
# libcpuinfo interposes on the wheel's own copy (NNPACK then fails to start).
#   scripts/avx2-cap.sh [--world debian|torch2] CMD...   (default debian)
#   scripts/avx2-cap.sh ctest --test-dir build -j2
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
world=debian
if [ "${1:-}" = "--world" ]; then world=${2:?--world debian|torch2}; shift 2; fi
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
# The BLAS: Debian's OpenBLAS (1.13's; linears and the 1x1 convs ATen runs as
# GEMMs) and the wheels' MKL pick kernels by CPUID, uncapped by the two above
# (OPENBLAS_VERBOSE=2 names the core OpenBLAS chose).
export OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2
if [ "$world" = debian ]; then
  shim=$root/build/libcpuinfo_avx2_cap.so
  if [ -f /usr/include/cpuinfo.h ] && { [ ! -f "$shim" ] || [ "$root/bench/cpuinfo_avx2_cap.c" -nt "$shim" ]; }; then
    mkdir -p "$root/build"
    gcc -O2 -shared -fPIC "$root/bench/cpuinfo_avx2_cap.c" -o "$shim" -lcpuinfo
  fi
  [ -f "$shim" ] && export LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}"
fi
exec "$@"
