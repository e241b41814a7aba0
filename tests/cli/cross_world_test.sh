#!/usr/bin/env bash
# Files cross the two PyTorch worlds (docs/pytorch-worlds.md): ResNet-18s
# scripted and traced by the other world's torch are optimized (-O2, verified)
# by this build, and the results reload and match the originals in both
# torches; then the same for files made by this world's torch.
# Usage: cross_world_test.sh PTOPT PYTHON OTHER_PYTHON
set -u
ptopt=$1; py=$2; other=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
helper=$(dirname "$0")/../python/cross_world.py
if ! "$other" -W ignore -c 'import torch, torchvision' >/dev/null 2>&1; then
  echo "SKIPPED: the other PyTorch world ($other) has no torch and torchvision (scripts/setup-torch2.sh makes .venv)"
  exit 0
fi
for maker in "$other" "$py"; do
  dir=$work/$(basename "$(dirname "$(dirname "$maker")")")
  "$maker" "$helper" make "$dir" || { fail "cannot make models with $maker"; continue; }
  for mode in script trace; do
    in=$dir/resnet18_$mode.pt; out=$dir/resnet18_$mode.O2.pt
    expect 0 "PASSED" -- "$ptopt" "$in" "$out" -O2 --input-shape 2,3,64,64 --no-measure
    [ -f "$out" ] || continue
    for reader in "$py" "$other"; do
      expect 0 ": ok$" -- "$reader" "$helper" check "$in" "$out" "$dir/inputs.pt"
      echo "$last_output"
    done
  done
done
[ "$failures" = 0 ] && echo "cross-world: every file reloads and matches in both worlds"
exit $((failures > 0))
