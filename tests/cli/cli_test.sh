#!/usr/bin/env bash
# End-to-end checks of the ptopt command line: exit codes, messages, files.
# Usage: cli_test.sh PTOPT FIXTURES_DIR PYTHON
set -u
ptopt=$1; fx=$2; py=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# --version names the LibTorch built against (the one this test's Python runs)
# and whether CUDA was compiled in.
torch_mm=$("$py" -W ignore -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))')
expect 0 "^ptopt [0-9.]+ \(LibTorch ${torch_mm//./\\.}\.[0-9]+, (CUDA [0-9.]+ compiled in|CPU only: no CUDA compiled in)\)$" -- "$ptopt" --version

# The empty pipeline writes a model that loads; verification is bitwise.
expect 0 "bitwise equal" -- "$ptopt" "$fx/resnet18_script.pt" "$work/r.pt" --passes '' --input-shape 1,3,64,64
[ -s "$work/r.pt" ] || fail "no output written"
# An existing output is kept unless --overwrite.
expect 2 "exists; pass --overwrite" -- "$ptopt" "$fx/resnet18_script.pt" "$work/r.pt" --passes ''
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/r.pt" --passes '' --overwrite
# OUT == IN, also through a link, is refused and the input is untouched.
cp "$fx/conv1d_bn.pt" "$work/in.pt"; sum=$(md5sum < "$work/in.pt")
ln -s "$work/in.pt" "$work/link.pt"
expect 2 "input file itself" -- "$ptopt" "$work/in.pt" "$work/link.pt" --passes '' --overwrite
[ "$(md5sum < "$work/in.pt")" = "$sum" ] || fail "input modified"

# --in-place replaces IN only when asked, and keeps its permissions.
cp "$fx/conv1d_bn.pt" "$work/inplace.pt"; chmod 640 "$work/inplace.pt"
expect 2 "is the input file itself.*--in-place" -- "$ptopt" "$work/inplace.pt" "$work/inplace.pt" -O1
expect 0 "PASSED" -- "$ptopt" "$work/inplace.pt" "$work/inplace.pt" -O1 --in-place --input-shape 1,4,32
[ "$(stat -c %a "$work/inplace.pt")" = 640 ] || fail "--in-place lost the file's permissions"
expect 2 "--in-place: OUT .* is not the input file" -- "$ptopt" "$fx/conv1d_bn.pt" "$work/other.pt" --in-place
# --overwrite keeps the replaced file's permissions.
chmod 600 "$work/r.pt"
expect 0 "PASSED" -- "$ptopt" "$fx/resnet18_script.pt" "$work/r.pt" --passes '' --overwrite
[ "$(stat -c %a "$work/r.pt")" = 600 ] || fail "--overwrite lost the file's permissions"
# OUT in a missing folder, or OUT a folder: exit 2 before any work.
expect 2 "does not exist; create it first" -- "$ptopt" "$fx/conv1d_bn.pt" "$work/no/such/dir/o.pt"
mkdir "$work/adir"
expect 2 "is a directory" -- "$ptopt" "$fx/conv1d_bn.pt" "$work/adir"
rmdir "$work/adir"
# A full disk (simulated by a file-size limit) fails cleanly: exit 1, no temporary file left.
mkdir "$work/full"
out=$( (trap '' XFSZ; ulimit -f 64; "$ptopt" "$fx/resnet18_script.pt" "$work/full/o.pt" --passes '' 2>&1) ); rc=$?
[ "$rc" = 1 ] || fail "disk full: expected exit 1, got $rc: $out"
grep -q "cannot write" <<<"$out" || fail "disk full: no clear message: $out"
[ -z "$(ls -A "$work/full")" ] || fail "disk full left files behind: $(ls -A "$work/full")"
rmdir "$work/full"
# The summary: op table, sizes, per-pass times, one final line; --progress on stderr.
out=$("$ptopt" "$fx/resnet18_script.pt" "$work/sum.pt" -O1 --input-shape 1,3,64,64 --progress 2>"$work/progress.txt")
for p in "\\* aten::batch_norm +20 +0" "parameters .* -> " "fold-conv-bn +2 +1" "fixpoint\(fold-conv-bn,[a-z,-]*\): 2 rounds" "^verification: passed" "^PASSED: .*sum.pt -O1"; do
  grep -qE -- "$p" <<<"$out" || fail "summary lacks /$p/: $out"
done
grep -qE "\[ +[0-9]+\] fold-conv-bn" "$work/progress.txt" || fail "no progress lines: $(cat "$work/progress.txt")"
rm -f "$work/sum.pt" "$work/progress.txt" "$work/inplace.pt"

# Bad input: exit 2, one clear line, no output file.
for bad in state_dict:"torch.save\(\) checkpoint" not_a_zip:"not a zip archive" legacy_pickle:"legacy torch.save"; do
  name=${bad%%:*}; pattern=${bad#*:}
  expect 2 "$pattern" -- "$ptopt" "$fx/bad/$name.pt" "$work/$name.out.pt"
  [ ! -e "$work/$name.out.pt" ] || fail "output left behind for $name"
done
# A torch.export program: a 1.13 build names it as one and says what reads
# it (nothing written, also not when OUT asks for a .pt2); a 2.x build
# reads it (tests/export covers .pt2 in depth).
if "$ptopt" --version | grep -q "LibTorch 1\."; then
  expect 2 "is a torch.export program \\(.pt2\\).*has no torch.export.*PyTorch 2" -- \
    "$ptopt" "$fx/bad/exported.pt2" "$work/exported.out.pt"
  [ ! -e "$work/exported.out.pt" ] || fail "output left behind for exported.pt2"
  expect 2 "is a .pt2: .*has no torch.export" -- "$ptopt" "$fx/resnet18_script.pt" "$work/r.out.pt2"
  [ ! -e "$work/r.out.pt2" ] || fail "output left behind for r.out.pt2"
else
  expect 0 "PASSED" -- "$ptopt" "$fx/bad/exported.pt2" "$work/exported.out.pt2" --no-measure
  rm -f "$work/exported.out.pt2"
fi
expect 2 "No such file" -- "$ptopt" "$work/missing.pt" "$work/x.pt"
[ -z "$(ls -A "$work" | grep -v -e '^r.pt$' -e '^in.pt$' -e '^link.pt$')" ] || fail "stray files: $(ls -A "$work")"
# A shape that does not fit the model.
expect 2 "fails on the given inputs" -- "$ptopt" "$fx/resnet18_script.pt" "$work/s.pt" --input-shape 1,5,64,64
[ ! -e "$work/s.pt" ] || fail "output written despite a bad shape"
expect 2 "bad input shape" -- "$ptopt" "$fx/resnet18_script.pt" "$work/s.pt" --input-shape 1,x,3
# Usage errors.
expect 2 "expected IN.pt OUT.pt" -- "$ptopt"
expect 2 "" -- "$ptopt" "$fx/resnet18_script.pt" "$work/y.pt" --no-such-flag

# show prints the IR and the op table.
expect 0 "aten::_convolution" -- "$ptopt" show "$fx/resnet18_trace.pt"
expect 0 "total" -- "$ptopt" show --ops "$fx/mobilenet_v2_script.pt"

# Pipelines: a bad one writes nothing and exits 2 with a caret and a suggestion.
expect 2 "did you mean 'fold-conv-bn'" -- "$ptopt" "$fx/resnet18_script.pt" "$work/p.pt" --passes 'fold-conv-nb'
[ ! -e "$work/p.pt" ] || fail "output written for a bad pipeline"
expect 2 "has no option 'depth'" -- "$ptopt" "$fx/resnet18_script.pt" "$work/p.pt" --passes 'cse{depth=2}'
expect 2 "only one of" -- "$ptopt" "$fx/resnet18_script.pt" "$work/p.pt" --passes 'cse' -O1
printf '# clean up\ncanonicalize,\n  fixpoint{max-iter=3}(  # repeat\n    cse, dce)\n' > "$work/pipe.txt"
expect 0 "^canonicalize,fixpoint\{max-iter=3\}\(cse,dce\)$" -- "$ptopt" --pipeline-file "$work/pipe.txt" --print-pipeline
expect 0 "^canonicalize,remove-dropout,bn-inference" -- "$ptopt" -O1 --print-pipeline
# --passes takes a preset with more passes, placed as -O1,more everywhere.
expect 0 "channels-last\{mode=auto\},quantize\{mode=dynamic\},fuse-cudnn$" -- \
  "$ptopt" --passes '-O2,quantize{mode=dynamic}' --print-pipeline
expect 2 "unknown pass 'quantise'" -- "$ptopt" --passes '-O2,quantise' --print-pipeline
# One rule for extra passes (rewriters::addExtraPasses): --rules files run
# after the preset's rewrites and before its closing fuse-cudnn, in order;
# after everything when the pipeline does not close with fuse-cudnn.
printf 'x' > "$work/a.rules"; printf 'x' > "$work/b.rules"
expect 0 "\(canonicalize,const-fold,cse,dce\),channels-last\{mode=auto\},rules\{file=[^}]*/a\.rules\},rules\{file=[^}]*/b\.rules\},fuse-cudnn$" \
  -- "$ptopt" -O2 --rules "$work/a.rules" --rules "$work/b.rules" --print-pipeline
expect 0 "^cse,rules\{file=[^}]*/a\.rules\},fuse-cudnn$" -- "$ptopt" --passes 'cse,fuse-cudnn' --rules "$work/a.rules" --print-pipeline
expect 0 "^fuse-cudnn,cse,rules\{file=[^}]*/a\.rules\}$" -- "$ptopt" --passes 'fuse-cudnn,cse' --rules "$work/a.rules" --print-pipeline
expect 0 "BISECT: NOT running pass \(3\) dce" -- "$ptopt" "$fx/resnet18_trace.pt" "$work/b.pt" --passes 'canonicalize,cse,dce' --bisect-limit 2
expect 0 "IR after dce" -- "$ptopt" "$fx/conv1d_bn.pt" "$work/c.pt" --passes 'dce' --print-after-all --verify-each
expect 0 "fold-conv-bn: not rewriting .*another user" -- "$ptopt" "$fx/conv_reused_output.pt" "$work/e.pt" -O1 --explain
expect 0 "fold-conv-bn +[0-9]+ +1" -- "$ptopt" "$fx/conv1d_bn.pt" "$work/t.pt" -O1 --time-passes
expect 0 "" -- "$ptopt" passes fold-conv-bn
expect 2 "did you mean 'dce'" -- "$ptopt" passes dec

# Every fixture: canonicalize + cse/dce fixpoint with --print-changed and
# --time-passes, outputs within 1e-6 of the original.
"$py" - "$fx/fixtures.json" > "$work/shapes.txt" <<'PY'
import json, sys
for f in json.load(open(sys.argv[1]))["fixtures"]:
    args = []
    for i in f["inputs"]:
        if i["type"] == "tensor":
            s = ",".join(map(str, i["shape"]))
            if i.get("dtype", "float32") != "float32":
                s += ":" + i["dtype"]
        else:
            s = "%s:%s" % (i["type"], int(i["value"]))
        args += ["--input-shape", s]
    print(f["file"], " ".join(args))
PY
while read -r file shapes; do
  # shellcheck disable=SC2086
  expect 0 "PASSED" -- "$ptopt" "$fx/$file" "$work/g_$file" --passes 'canonicalize,fixpoint{max-iter=3}(cse,dce)' \
    --print-changed --time-passes --rtol 1e-6 --atol 1e-6 --verify-iters 1 $shapes
done < "$work/shapes.txt"

# A user rule file rewrites a real model.
expect 0 "hardtanh-inplace-to-relu6=35" -- "$ptopt" "$fx/mobilenet_v2_script.pt" "$work/m.pt" --passes '' \
  --rules "$(dirname "$0")/../../examples/rules/example.rules" --input-shape 1,3,64,64

# The output loads in stock PyTorch.
"$py" -c "import torch,sys; m=torch.jit.load(sys.argv[1]); m(torch.randn(1,3,64,64))" "$work/r.pt" \
  || fail "python could not load the output"

# ptopt bench: interleaved A/B timing with a ratio and its interval, JSON.
expect 0 "B/A median ratio [0-9.]+x \(95% CI [0-9.]+-[0-9.]+" -- "$ptopt" bench "$fx/resnet18_script.pt" --vs "$work/r.pt" \
  --input-shape 1,3,64,64 --threads 1 --warmup 0.1 --iters 8 --batch 1,2 --json "$work/bench.json"
"$py" - "$work/bench.json" <<'PY' || fail "bench JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["inputs"] == "1,3,64,64", r["inputs"]
assert len(r["results"]) == 2, r["results"]  # batch 1 and 2
PY

# --input-shape takes several values: before IN OUT it would swallow them.
expect 2 "'$fx/resnet18_script.pt' is a file, not a shape: put --input-shape after IN OUT" -- \
  "$ptopt" --input-shape 1,3,64,64 "$fx/resnet18_script.pt" "$work/shape_first.pt"
[ ! -e "$work/shape_first.pt" ] || fail "a refused run wrote its output"

# A CUDA target (issue 11): fp16 and cuDNN fusions; on a machine without a
# GPU the CPU stand-in is verified and says so, and `ptopt verify` refuses
# the file (it needs CUDA), naming the reason.
if ! "$py" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  expect 0 "fuse-cudnn: relu=9 add-relu=8" -- "$ptopt" "$fx/resnet18_script.pt" "$work/cuda.pt" -O3 --target cuda \
    --input-shape 1,3,64,64
  grep -q "left out of the CPU check" <<<"$last_output" || fail "no stand-in note: $last_output"
  grep -q "fp16 checked by emulation" <<<"$last_output" || fail "no fp16 emulation note: $last_output"
  "$py" -c "import torch,sys; assert torch.jit.load(sys.argv[1]).ptopt_requires_cuda" "$work/cuda.pt" \
    || fail "the CUDA-target file does not record that it needs CUDA"
  expect 2 "is for CUDA .*cuDNN's fused kernels.*--device cuda" -- "$ptopt" verify "$fx/resnet18_script.pt" "$work/cuda.pt" \
    --input-shape 1,3,64,64
  expect 0 "fuse-cudnn: .*the target is cpu" -- "$ptopt" "$fx/resnet18_script.pt" "$work/cpu.pt" -O1 --explain \
    --input-shape 1,3,64,64
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all CLI checks passed"
