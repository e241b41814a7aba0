# Shared by the CLI test scripts: a scratch folder, a failure count, and
# `expect CODE PATTERN -- command...` (PATTERN is matched, as an extended
# regex, against the command's stdout and stderr together); the output is
# left in $last_output.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  last_output=$out
  [ "$rc" = "$code" ] || fail "expected exit $code, got $rc: $*"$'\n'"$out"
  [ -z "$pattern" ] || grep -qE -- "$pattern" <<<"$out" || fail "output of '$*' lacks /$pattern/:"$'\n'"$out"
}
