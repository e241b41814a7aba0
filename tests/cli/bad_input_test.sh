#!/usr/bin/env bash
# Runs `ptopt IN OUT` on every file of the bad-input corpus
# (tests/bad_inputs/make_corpus.py) and checks, for each: exit code 2 (not 1,
# not a signal such as 134/139, not 124 from the timeout), stderr starting
# with a `ptopt: error:` line that names the file, no crash text, nothing
# left in the output folder (no OUT, no temporary file), the input unchanged.
# The corpus's good model must still optimize (exit 0), so the harness itself
# is checked too.
#
# Usage: bad_input_test.sh PTOPT CORPUS_DIR [TIMEOUT_SECONDS]
set -uo pipefail
ptopt=$1
corpus=$2
limit=${3:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/results"

check_one() {
  local in=$1 ptopt=$2 work=$3 limit=$4
  local name out rc first
  name=$(basename "$in")
  out="$work/out/$name"
  mkdir -p "$out"
  timeout -k 5 "$limit" "$ptopt" "$in" "$out/model.pt" >"$out.stdout" 2>"$out.stderr"
  rc=$?
  first=$(head -n 1 "$out.stderr")
  local problem=""
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then problem="hung (killed by timeout after ${limit}s)"
  elif [ "$rc" -ge 128 ]; then problem="died of signal $((rc - 128)) (exit $rc)"
  elif [ "$rc" -ne 2 ]; then problem="exit code $rc, expected 2"
  elif [[ "$first" != "ptopt: error: "* ]]; then problem="stderr does not start with 'ptopt: error: '"
  elif [[ "$first" != *"$name"* ]]; then problem="the error does not name the file"
  elif grep -qiE "internal error|terminate called|Exception raised from|Segmentation|Aborted|AddressSanitizer" "$out.stderr"; then
    problem="crash text on stderr"
  elif [ -n "$(ls -A "$out")" ]; then problem="left files in the output folder: $(ls -A "$out" | tr '\n' ' ')"
  fi
  if [ -n "$problem" ]; then
    { echo "FAIL $name: $problem"; sed 's/^/    /' "$out.stderr" | head -n 8; } >"$work/results/$name"
  else
    echo "ok   $name: ${first#ptopt: error: }" | cut -c1-220 >"$work/results/$name"
  fi
}
export -f check_one

[ -d "$corpus/bad" ] || { echo "no corpus in $corpus (run tests/bad_inputs/make_corpus.py)"; exit 1; }
before=$(cd "$corpus" && find . -type f | sort | xargs sha1sum)

# The good model first: the harness must see a success.
mkdir -p "$work/good"
if ! timeout "$limit" "$ptopt" "$corpus/good/model.pt" "$work/good/out.pt" --no-verify >/dev/null 2>"$work/good.stderr"; then
  echo "FAIL: the corpus's good model does not optimize:"; cat "$work/good.stderr"; exit 1
fi

find "$corpus/bad" -mindepth 1 -maxdepth 1 -print0 |
  xargs -0 -P "$(nproc)" -I{} bash -c 'check_one "$1" "$2" "$3" "$4"' _ {} "$ptopt" "$work" "$limit"

cat "$work/results/"* | sort
total=$(ls "$work/results" | wc -l)
failed=$(grep -l "^FAIL" "$work/results/"* 2>/dev/null | wc -l)
expected=$(find "$corpus/bad" -mindepth 1 -maxdepth 1 | wc -l)
after=$(cd "$corpus" && find . -type f | sort | xargs sha1sum)
status=0
if [ "$before" != "$after" ]; then echo "FAIL: ptopt modified files of the corpus"; status=1; fi
if [ "$total" -ne "$expected" ]; then echo "FAIL: $total results for $expected corpus files"; status=1; fi
if [ "$failed" -ne 0 ]; then echo "FAIL: $failed of $total bad inputs were not refused cleanly"; status=1; fi
[ "$status" -eq 0 ] && echo "all $total bad inputs refused with exit 2, a reason naming the file, nothing written"
exit $status
