#!/usr/bin/env bash
# Import + export + save time of ptopt on conv-bn-relu stacks of growing
# depth; the per-layer cost must stay flat (no quadratic step).
# Usage: bench/import_scaling.sh [PTOPT] [PIPELINE] [N...]
set -euo pipefail
cd "$(dirname "$0")/.."
ptopt=${1:-build/tools/ptopt}; pipeline=${2:-}; shift $(( $# > 2 ? 2 : $# )) || true
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(100 500 2000)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf "%8s %10s %10s %10s %10s %10s %12s\n" layers load_ms import_ms passes_ms export_ms save_ms per_layer_ms
for n in "${sizes[@]}"; do
  /usr/bin/python3 tests/fixtures/make_fixtures.py --stack "$n" "$work/stack$n.pt" >/dev/null
  line=$("$ptopt" "$work/stack$n.pt" "$work/out$n.pt" --passes "$pipeline" --no-verify | grep '^timing:')
  get() { sed -E "s/.*$1=([0-9.]+)ms.*/\1/" <<<"$line"; }
  load=$(get load); imp=$(get import); pas=$(get passes); exp=$(get export); save=$(get save)
  [ "$pas" = "$line" ] && pas=0
  per=$(awk -v a="$imp" -v p="$pas" -v b="$exp" -v c="$save" -v n="$n" 'BEGIN{printf "%.3f", (a+p+b+c)/n}')
  printf "%8s %10s %10s %10s %10s %10s %12s\n" "$n" "$load" "$imp" "$pas" "$exp" "$save" "$per"
done
