#!/usr/bin/env bash
# The CUDA-machine check of issue 11, in one command. On a machine with an
# NVIDIA GPU and Python with PyTorch 2.x (so LibTorch with CUDA and cuDNN),
# no package access, after ../shared/gpu/bundle-deps.sh has written
# .gpu/deps.tgz (Boost, CLI11, nlohmann-json, fmt, Catch2 headers) here:
#   1. configures against the machine's LibTorch, builds with ninja
#      (GraphViz rendering off: that machine has no libgvc);
#   2. runs the test suite (fixtures made by the machine's Python; CUDA
#      execution tests run instead of being skipped);
#   3. GPU verification: resnet50, mobilenet_v2 and a convnext-style model
#      (torchvision, random weights) through -O1, -O2, -O3 (fp16) and -O3
#      --prefer-bf16 with --device cuda and verification (TF32 off for the
#      reference), reports as JSON;
#   4. GPU benchmark: `ptopt bench --device cuda --batch 1,64` of each
#      optimized file and of torch.jit.freeze's against the original,
#      interleaved, one run per model.
# Everything goes to OUT_DIR (logs, reports, JSON); the summary is printed.
# Usage: scripts/gpu-check.sh OUT_DIR [MODELS]   (MODELS: comma list,
# default resnet50,mobilenet_v2,convnext_tiny; QUICK=1 for shorter timings)
set -uo pipefail
out=${1:?usage: scripts/gpu-check.sh OUT_DIR [MODELS]}
models=${2:-resnet50,mobilenet_v2,convnext_tiny}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$out/summary.txt"; }

# 0. The machine.
{
  nvidia-smi 2>&1 | head -20
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0))'
  "$py" -c 'import torchvision; print("torchvision", torchvision.__version__)' 2>&1
} > "$out/machine.txt" 2>&1
log "machine: $(grep '^torch ' "$out/machine.txt")"

# 1. Configure and build.
deps=$(mktemp -d)
tar xzf "$root/.gpu/deps.tgz" -C "$deps" || { log "no .gpu/deps.tgz: run ../shared/gpu/bundle-deps.sh first"; exit 1; }
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_INCLUDE_PATH="$deps/include" -DBoost_INCLUDE_DIR="$deps/include" -DPTOPT_WITH_GRAPHVIZ=OFF \
    -DPTOPT_PYTHON="$(command -v "$py")" > "$out/configure.log" 2>&1; then
  log "configure FAILED (configure.log)"; tail -30 "$out/configure.log"; exit 1
fi
if ! cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1; then
  log "build FAILED (build.log)"; grep -m20 -B2 -A6 "error" "$out/build.log"; exit 1
fi
log "built ptopt against $prefix"
ptopt=$build/tools/ptopt

# 2. The test suite.
(cd "$build" && ctest -j "$(nproc)" --timeout 900 --output-on-failure) > "$out/ctest.log" 2>&1
log "ctest: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
grep -E "^\s+[0-9]+ - " "$out/ctest.log" | head -40 >> "$out/summary.txt"

# 3. GPU verification. Models: torchvision, random weights and random
# BatchNorm statistics (as bench/harness.py), scripted.
work=$out/models
mkdir -p "$work"
"$py" - "$work" "$models" <<'PY' > "$out/models.log" 2>&1
import sys, torch, torchvision
out, names = sys.argv[1], sys.argv[2].split(",")
torch.manual_seed(0)
for name in names:
    m = getattr(torchvision.models, name)(weights=None).eval()
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1); mod.running_var.uniform_(0.5, 1.5)
    s = torch.jit.script(m)
    s.save(f"{out}/{name}.pt")
    torch.jit.freeze(s).save(f"{out}/{name}.freeze.pt")
    print("made", name)
PY
log "models: $(grep -c made "$out/models.log") made (models.log)"
shape=1,3,224,224
for name in ${models//,/ }; do
  m=$work/$name.pt
  [ -f "$m" ] || continue
  for variant in O1:-O1 O2:-O2 O3:-O3 O3bf16:"-O3 --prefer-bf16"; do
    tag=${variant%%:*}; flags=${variant#*:}
    # shellcheck disable=SC2086
    "$ptopt" "$m" "$work/$name.$tag.pt" $flags --device cuda --input-shape $shape --overwrite \
      --report "$out/$name.$tag.verify.json" > "$out/$name.$tag.verify.log" 2>&1
    log "verify $name $tag: exit $? $(tail -1 "$out/$name.$tag.verify.log" | cut -c1-60); $(grep -m1 '^verification:' "$out/$name.$tag.verify.log")"
  done
done

# 4. GPU benchmark: each variant interleaved with the original, batch 1 and 64.
timing="--min-time 2"
[ "${QUICK:-0}" = 1 ] && timing="--min-time 0.5"
for name in ${models//,/ }; do
  m=$work/$name.pt
  [ -f "$m" ] || continue
  for tag in freeze O1 O2 O3 O3bf16; do
    b=$work/$name.$tag.pt
    [ -f "$b" ] || continue
    # shellcheck disable=SC2086
    "$ptopt" bench "$m" --vs "$b" --device cuda --input-shape $shape --batch 1,64 $timing \
      --json "$out/$name.$tag.bench.json" > "$out/$name.$tag.bench.log" 2>&1
    log "bench $name $tag vs original: exit $? $(grep -iE 'ratio' "$out/$name.$tag.bench.log" | tr '\n' ' ' | cut -c1-160)"
  done
done
log "done: logs in $out"
