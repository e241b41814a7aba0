#!/usr/bin/env bash
# Installs ptopt into a scratch prefix, builds examples/scripted_pipeline
# against it with find_package(ptopt), and runs it on a fixture.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR FIXTURES_DIR
set -euo pipefail
build=$1; src=$2; fx=$3
prefix=$build/install-test
rm -rf "$prefix" "$build/example-build"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$src/examples/scripted_pipeline" -B "$build/example-build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build/example-build" >/dev/null
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$build/example-build/scripted_pipeline" "$fx/resnet18_trace.pt" "$out/r.pt" 1,3,64,64
[ -s "$out/r.pt" ] || { echo "no output written"; exit 1; }
"$prefix/bin/ptopt" passes >/dev/null
echo "installed package works"
