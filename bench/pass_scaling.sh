#!/usr/bin/env bash
# Per-node time of each generic pass and the rewrite driver (rules) on
# conv-bn-relu stacks of growing depth; it must stay flat (linear passes).
# Usage: bench/pass_scaling.sh [PTOPT] [N...]
set -euo pipefail
cd "$(dirname "$0")/.."
ptopt=${1:-build/tools/ptopt}; shift || true
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(100 500 2000)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/stack.rules" <<'RULES'
rule relu-relu
  pattern
    graph(%x : Tensor):
      %a : Tensor = aten::relu(%x)
      %b : Tensor = aten::relu(%a)
      output(%b)
  replacement
    graph(%x : Tensor):
      %a : Tensor = aten::relu(%x)
      output(%a)
RULES
passes=(canonicalize const-fold cse dce functionalize shape-prop "rules{file=$work/stack.rules}" fold-conv-bn)
printf "%-14s" pass; for n in "${sizes[@]}"; do printf "%16s" "us/node@$n"; done; echo
for n in "${sizes[@]}"; do
  /usr/bin/python3 tests/fixtures/make_fixtures.py --stack "$n" "$work/s$n.pt" >/dev/null
done
for p in "${passes[@]}"; do
  label=${p%%\{*}
  printf "%-14s" "$label"
  for n in "${sizes[@]}"; do
    out=$("$ptopt" "$work/s$n.pt" "$work/o.pt" --passes "$p" --time-passes --overwrite -q --no-verify \
          --input-shape 1,8,8,8 2>&1 || true)
    nodes=$("$ptopt" show --ops "$work/s$n.pt" | awk '/nodes,/ {gsub(/[(,]/," "); for(i=1;i<=NF;i++) if($(i+1)=="nodes") print $i}' | head -1)
    ms=$(awk -v p="$label" '$1==p {gsub("ms","",$4); print $4}' <<<"$out" | head -1)
    awk -v ms="${ms:-0}" -v n="$nodes" 'BEGIN{printf "%16.3f", ms*1000/n}'
  done
  echo
done
