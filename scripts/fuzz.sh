#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz/, then runs each for SECONDS
# (default 30) starting from its seed corpus in tests/fuzz/corpus/TARGET.
#
#   scripts/fuzz.sh --ci            # CI smoke: a fixed seed and a fixed number of
#                                   # runs per target (~10 s each), from the seed
#                                   # corpus only, so the result is reproducible
#   scripts/fuzz.sh 30              # 30 s per target
#   scripts/fuzz.sh 3600            # a long run: an hour per target
#   scripts/fuzz.sh 600 ir_text     # one target
#
# New interesting inputs go to build-fuzz/corpus/TARGET (not into git); a
# crash leaves its input in build-fuzz/crashes/TARGET/ and makes the script
# exit 1. Reproduce one with: build-fuzz/tests/fuzz/TARGET_fuzz FILE. After
# fixing it, copy the input into tests/fuzz/corpus/TARGET/ as a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
if [ "${1:-}" = "--ci" ]; then ci=1; shift; fi
seconds=${1:-30}
[ $# -gt 0 ] && shift
# CI: runs per target for about 10 s each on this kind of machine.
declare -A ci_runs=([archive_check]=200000 [input_shape]=300000 [pipeline]=50000 [ir_text]=50000 [pt2_read]=20000)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(archive_check input_shape pipeline ir_text pt2_read)
build=${PTOPT_FUZZ_BUILD_DIR:-build-fuzz}

if [ ! -f "$build/build.ninja" ]; then
  # -g1: line tables, enough for the sanitizers' symbolized reports, and a faster build.
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DPTOPT_FUZZ=ON -DPTOPT_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target "${targets[@]/%/_fuzz}"

# Leak checking is off: LibTorch interns operator names and schemas in
# process-wide tables on first use, which LeakSanitizer reports as leaks.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  if [ "$ci" = 1 ]; then
    # New inputs go to a scratch folder, so every CI run starts the same.
    corpus=$(mktemp -d)
    limit=(-seed=1 -runs="${ci_runs[$t]}")
    echo "== fuzzing $t: ${ci_runs[$t]} runs, seed 1"
  else
    corpus=$build/corpus/$t
    limit=(-max_total_time="$seconds")
    echo "== fuzzing $t for ${seconds}s"
  fi
  if ! "$build/tests/fuzz/${t}_fuzz" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 \
       -max_len=16384 -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" \
       "$corpus" "tests/fuzz/corpus/$t" 2>"$build/$t.log"; then
    failed+=("$t")
    tail -n 60 "$build/$t.log"
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/$t.log" | tail -n 2 || true
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crashes in ${failed[*]}; inputs in $build/crashes/"
  exit 1
fi
if [ "$ci" = 1 ]; then echo "fuzz: ${targets[*]}: no crash (CI smoke)"; else echo "fuzz: ${targets[*]}: no crash in ${seconds}s each"; fi
