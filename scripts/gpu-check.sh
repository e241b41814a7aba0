#!/usr/bin/env bash
# The whole CUDA check (issues 11 and 36) in one command that fits a short
# lease of a GPU machine. On a machine with an NVIDIA GPU and Python with
# PyTorch 2.x (so LibTorch with CUDA and cuDNN) and torchvision, no package
# access, after ../shared/gpu/bundle-deps.sh has written .gpu/deps.tgz (Boost,
# CLI11, nlohmann-json, fmt, Catch2 headers) here:
#   0. the machine (nvidia-smi, torch, CUDA, cuDNN);
#   1. starts torch.compile's compiles in the background, at the lowest
#      priority (bench/gpu.py --warm: Inductor's caches then make the timed
#      run's compiles quick);
#   2. configures against the machine's LibTorch and builds with ninja what
#      the check runs (GraphViz rendering off: that machine has no libgvc);
#   3. the CUDA tests: the Catch2 cases tagged [cuda] (verification on CUDA,
#      fuse-cudnn's fused kernels, the CUDA probe) and `ctest -L cuda`
#      (tests/cli/cuda_test.sh: resnet18/50 verified on CUDA, fuse-cudnn
#      counted, the never-slower stage and `ptopt bench` on CUDA events,
#      --tune on CUDA, the Python package with CUDA tensors);
#   4. the GPU benchmark (bench/gpu.py): resnet50, mobilenet_v2,
#      efficientnet_b0, convnext_tiny, vit_b_16 at batch 1 and 64: the fp32
#      original, freeze, optimize_for_inference, ptopt -O2, -O3 (fp16) and
#      -O3 --tune (each verified by ptopt on the GPU), torch.compile default
#      and max-autotune, interleaved.
# Every stage keeps to a deadline (GPU_CHECK_SECONDS, default 540, from the
# start): what would end past it is skipped and said so. OUT_DIR gets at most
# a handful of files (the device tool returns 8): summary.txt, machine.txt,
# gpu_bench.md, gpu_bench.json and logs.tgz (every log and report).
# GPU_CHECK_PHASE splits the check over two calls on the same warm machine
# (a lease's device time then goes to work, not to one call's limit):
#   all (default)  everything above, in order;
#   tests          0-3, with the torch.compile warm-up in a process session
#                  of its own (it outlives the call) and the -O2/-O3 files
#                  made on the GPU while the tests run;
#   bench          4 only, keeping what `tests` left in WORK_DIR (built
#                  again first if the machine is a fresh one).
# Usage: scripts/gpu-check.sh OUT_DIR [MODELS]
#   Locally, without a GPU (a dry run of everything but the GPU stages):
#   PYTHON=.venv/bin/python scripts/gpu-check.sh /tmp/gpu-dry
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUT_DIR [MODELS]}
models=${2:-resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny,vit_b_16}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-540}))
phase=${GPU_CHECK_PHASE:-all}
case $phase in all|tests|bench) ;; *) echo "GPU_CHECK_PHASE is all, tests or bench, not '$phase'" >&2; exit 2;; esac
work=${WORK_DIR:-/tmp/ptopt-gpu}
build=${BUILD_DIR:-$work/build}
logs=$work/logs
mkdir -p "$out" "$logs" "$work/bench"
left() { echo $((deadline - $(date +%s))); }
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
pack() {
  [ "$phase" != tests ] && [ -f "$work/warm.pid" ] && kill "$(cat "$work/warm.pid")" 2>/dev/null
  cp "$out/summary.txt" "$logs/" 2>/dev/null
  find "$work/bench" -maxdepth 1 \( -name '*.log' -o -name '*.json' \) -exec cp {} "$logs/" \; 2>/dev/null
  tar czf "$out/logs.tgz" -C "$work" logs 2>/dev/null
}
trap pack EXIT

# 0. The machine.
{
  nvidia-smi 2>&1 | head -15
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
  "$py" -c 'import torchvision; print("torchvision", torchvision.__version__)' 2>&1
  echo "cores $(nproc)"; cmake --version | head -1; ninja --version
} > "$out/machine.txt" 2>&1
log "machine ($phase): $(grep '^torch ' "$out/machine.txt")"
gpu=0
"$py" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && gpu=1
bench_args=(--work "$work/bench" --models "$models")

# 1. torch.compile's compiles, in the background at the lowest priority (in
#    a process session of its own: a later `bench` call stops it).
if [ "$gpu" = 1 ] && [ "$phase" != bench ]; then
  rm -f "$work/warm.pid"
  setsid nice -n 19 "$py" "$root/bench/gpu.py" --warm "${bench_args[@]}" --pid-file "$work/warm.pid" \
    > "$logs/warm.log" 2>&1 < /dev/null &
  log "torch.compile warm-up started"
fi

build_tool() {
# 2. Configure and build what the check runs.
deps=$work/deps
mkdir -p "$deps"
tar xzf "$root/.gpu/deps.tgz" -C "$deps" || { log "no .gpu/deps.tgz: run ../shared/gpu/bundle-deps.sh first"; exit 1; }
# A header library the machine has already is taken from there, not from the
# bundle: two versions of one (nlohmann-json's ABI namespace differs per
# version) would meet at link time. Catch2 stays: the suite needs 2.x.
for h in boost/version.hpp nlohmann/json.hpp fmt/format.h CLI/CLI.hpp; do
  if echo "#include <$h>" | c++ -x c++ -std=c++17 -fsyntax-only - 2>/dev/null; then
    rm -rf "${deps:?}/include/${h%%/*}"; echo "using the machine's own ${h%%/*}" >> "$logs/configure.log"
  fi
done
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTOPT_PYTHON="$(command -v "$py")" \
    -DCMAKE_INCLUDE_PATH="$deps/include" -DBoost_INCLUDE_DIR="$deps/include" -DPTOPT_WITH_GRAPHVIZ=OFF \
    > "$logs/configure.log" 2>&1; then
  log "configure FAILED (configure.log)"; tail -30 "$logs/configure.log"; exit 1
fi
# The tool and the package first (the benchmark needs only them), then the
# test executables; a failure of the latter is reported, not fatal.
targets=(ptopt)
grep -q "ptopt_python" "$build/build.ninja" && targets+=(ptopt_python)
if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" -- -k 0 > "$logs/build.log" 2>&1; then
  log "build FAILED (build.log)"; grep -E "error|FAILED" "$logs/build.log" | grep -v "^/opt\|^/usr" | head -40 | tee -a "$out/summary.txt"; exit 1
fi
log "built ${targets[*]}: $("$ptopt" --version | head -1)"
}
ptopt=$build/tools/ptopt
if [ "$phase" = bench ] && [ -x "$ptopt" ]; then
  log "keeping the build of the earlier call: $("$ptopt" --version | head -1)"
else
  build_tool
fi

if [ "$phase" != bench ]; then
# The -O2 and -O3 files of the benchmark, made (and verified on the GPU)
# while the tests run; the `bench` call keeps them.
if [ "$gpu" = 1 ] && [ "$phase" = tests ]; then
  PYTHONUNBUFFERED=1 "$py" "$root/bench/gpu.py" --make-only --ptopt "$ptopt" "${bench_args[@]}" \
    --out "$work/bench/gpu_bench" > "$logs/gpu_make.log" 2>&1 &
  make_pid=$!
fi
if ! cmake --build "$build" -j "$(nproc)" --target fusion_tests verify_tests quant_tests -- -k 0 > "$logs/build_tests.log" 2>&1; then
  log "test build FAILED (build_tests.log)"; grep -E "error|FAILED|undefined" "$logs/build_tests.log" | grep -v "^/opt\|^/usr\|^:" | head -20 | tee -a "$out/summary.txt"
fi

# 3. The CUDA tests.
"$py" "$root/tests/fixtures/make_fixtures.py" "$build/fixtures" --only resnet18_script,resnet18_trace > "$logs/fixtures.log" 2>&1 \
  || log "fixtures FAILED (fixtures.log)"
for t in verify_tests fusion_tests quant_tests; do
  timeout $(( $(left) / 4 )) "$build/tests/$t" "[cuda]" > "$logs/$t.cuda.log" 2>&1
  log "$t [cuda]: exit $? $(grep -E 'test cases|All tests passed' "$logs/$t.cuda.log" | tail -1)"
done
keep=260  # the benchmark's share, when this call runs it
[ "$phase" = tests ] && keep=15
test_time=$(( $(left) - keep ))
[ "$test_time" -lt 170 ] && test_time=170
(cd "$build" && timeout "$test_time" ctest -L cuda --output-on-failure --timeout "$test_time") > "$logs/ctest_cuda.log" 2>&1
log "ctest -L cuda: exit $? $(grep -E 'tests passed|tests failed' "$logs/ctest_cuda.log" | tail -1)"
grep -E "^FAIL|SKIPPED|^CUDA:|tuned on CUDA|on the GPU:|package on CUDA" "$logs/ctest_cuda.log" | head -20 | tee -a "$out/summary.txt"
if [ -n "${make_pid:-}" ]; then
  wait "$make_pid"; log "the benchmark's -O2/-O3 files: exit $?"
  grep -E "^\[gpu.py" "$logs/gpu_make.log" | tail -12 >> "$out/summary.txt"
fi
fi

# 4. The GPU benchmark.
if [ "$phase" = tests ]; then
  log "done (the benchmark is the bench call's; the warm-up runs on: $(tail -1 "$logs/warm.log" 2>/dev/null))"
  exit 0
fi
reuse=()
[ "$phase" = bench ] && reuse=(--reuse)
if [ "$gpu" = 1 ]; then
  log "benchmark: $(left) s left"
  PYTHONUNBUFFERED=1 "$py" "$root/bench/gpu.py" --ptopt "$ptopt" "${bench_args[@]}" "${reuse[@]}" \
    --deadline $((deadline - 10)) --stop-warm-file "$work/warm.pid" --out "$out/gpu_bench" > "$logs/gpu_bench.log" 2>&1
  log "bench/gpu.py: exit $?"
  grep -E "^\[gpu.py" "$logs/gpu_bench.log" | tail -40 >> "$out/summary.txt"
else
  log "no CUDA device: the benchmark is not run"
fi
log "done"
