#!/usr/bin/env bash
# End-to-end checks of `ptopt dot` and `ptopt IN OUT --dot-dir DIR`.
# Usage: dot_test.sh PTOPT FIXTURES_DIR HAVE_GRAPHVIZ(0|1)
set -u
ptopt=$1; fx=$2; gv=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# DOT text: to a file, or to stdout.
expect 0 "wrote" -- "$ptopt" dot "$fx/resnet18_script.pt" -o "$work/r.dot"
grep -q '^digraph ptopt {' "$work/r.dot" || fail "r.dot is not a digraph"
grep -q '<B>conv2d</B>' "$work/r.dot" || fail "r.dot lacks conv2d labels"
expect 0 "^digraph ptopt" -- "$ptopt" dot "$fx/control_flow.pt"
expect 0 "f32 1×64×32×32" -- "$ptopt" dot "$fx/resnet18_script.pt" --input-shape 1,3,64,64 --color-by dtype
expect 0 "layer2" -- "$ptopt" dot "$fx/resnet18_script.pt" --depth 1
expect 0 "note" -- "$ptopt" dot "$fx/mobilenet_v2_script.pt" --show-constants
# Diffs: two files, or the model before/after a pipeline.
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/o1.pt" --passes fold-conv-bn --input-shape 1,3,64,64
expect 0 "0 added, 20 changed, 20 removed" -- "$ptopt" dot "$fx/resnet18_script.pt" --diff "$work/o1.pt" -o "$work/d.dot"
grep -q 'conv1 ← fold(conv1, bn1)' <("$ptopt" dot "$fx/resnet18_script.pt" --after -O1) || fail "--after -O1 lacks the fold provenance"
# Usage errors: exit 2.
expect 2 "no method 'nope'" -- "$ptopt" dot "$fx/resnet18_script.pt" --method nope
expect 2 "give it an extension" -- "$ptopt" dot "$fx/resnet18_script.pt" -o "$work/noext"
expect 2 "only one of --diff and --after" -- "$ptopt" dot "$fx/resnet18_script.pt" --diff "$work/o1.pt" --after -O1
expect 2 "invalid pipeline" -- "$ptopt" dot "$fx/resnet18_script.pt" --after 'no-such-pass'

if [ "$gv" = 1 ]; then
  start=$(date +%s%N)
  expect 0 "wrote" -- "$ptopt" dot "$fx/resnet18_script.pt" -o "$work/r.svg" --input-shape 1,3,64,64
  echo "resnet18 -> SVG: $(( ($(date +%s%N) - start) / 1000000 )) ms (whole command: load, import, shape-prop, layout, render)"
  grep -q '<svg' "$work/r.svg" || fail "r.svg is not SVG"
  # GraphViz has no complaint about the text (it warns on stderr).
  for f in resnet18_script mobilenet_v2_script control_flow; do
    "$ptopt" dot "$fx/$f.pt" -o "$work/$f.svg" >/dev/null 2>"$work/err.txt" || fail "dot $f failed"
    [ ! -s "$work/err.txt" ] || fail "GraphViz warnings for $f: $(head -5 "$work/err.txt")"
  done
  expect 0 "wrote" -- "$ptopt" dot "$fx/mobilenet_v2_script.pt" -o "$work/m.png"
  [ "$(head -c 4 "$work/m.png" | tail -c 3)" = PNG ] || fail "m.png is not a PNG"
  expect 0 "wrote" -- "$ptopt" dot "$fx/resnet18_script.pt" --diff "$work/o1.pt" -o "$work/d.svg"
  grep -q '#fff0a0' "$work/d.svg" || fail "the diff SVG has no changed (yellow) nodes"
  expect 2 "cannot render format" -- "$ptopt" dot "$fx/resnet18_script.pt" -o "$work/r.nosuchformat"
  ext=svg
else
  expect 2 "built without GraphViz" -- "$ptopt" dot "$fx/resnet18_script.pt" -o "$work/r.svg"
  [ ! -e "$work/r.svg" ] || fail "r.svg written without GraphViz"
  ext=dot
fi

# --dot-dir: before, one drawing per changing pass, after.
expect 0 "drawings: [0-9]+ files" -- "$ptopt" "$fx/resnet18_script.pt" "$work/o1b.pt" -O1 --dot-dir "$work/drawings"
ls "$work/drawings" > "$work/list.txt"
grep -q "^00-before\.$ext$" "$work/list.txt" || fail "no 00-before.$ext: $(cat "$work/list.txt")"
grep -q "^[0-9][0-9]-after-fold-conv-bn\.$ext$" "$work/list.txt" || fail "no after-fold-conv-bn drawing: $(cat "$work/list.txt")"
grep -q "^[0-9][0-9]-after\.$ext$" "$work/list.txt" || fail "no final after drawing: $(cat "$work/list.txt")"
# remove-dropout changes nothing on resnet18: no drawing for it.
! grep -q "remove-dropout" "$work/list.txt" || fail "drawing for a pass that changed nothing"

if [ "$failures" -gt 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all dot CLI checks passed"
