#!/usr/bin/env python3
"""The walkthrough of docs/adding-a-pass.md works when followed literally.

Takes every code block of the page marked `<!-- file: PATH -->` (a file the
reader creates) or `<!-- snippet: NAME -->` (lines the reader adds to an
existing file), writes them into a scratch project, builds that against ptopt
as installed by `cmake --install` (find_package(ptopt): only installed headers
and libraries), and runs the walkthrough's test, which must pass.

The snippets are the registry include and line; they go into a function of
the same shape as the folder's registry function, and a test case added here
checks that registering through them gives the pass with its contract.

Usage: add_a_pass_test.py SOURCE_DIR BUILD_DIR [--work DIR] [--jobs N]
       [--prefix PREFIX (an existing install: skip cmake --install)] [--cmake-arg ARG]...
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

BLOCK = re.compile(r"^<!-- (file|snippet): (\S+) -->\s*\n```[a-z]*\n(.*?)^```", re.S | re.M)

# What the walkthrough must contain; the names tie this script to the page.
PASS_HEADER = "rewriters/fold_mul_one.h"
TEST_FILE = "tests/rewriters/fold_mul_one_test.cpp"
SNIPPETS = ("register-include", "register-line", "register-tunable-include", "register-tunable-line",
            "register-lowp-include", "register-lowp-line")
# Step 7: a pass whose profit depends on the machine, with its tunable.
TUNABLE_HEADER = "kernels/square_to_mul.h"
TUNABLE_TEST_FILE = "tests/kernels/square_to_mul_test.cpp"
TUNABLE_REGISTRY_FILE = "kernels/register.cpp"
TUNABLE_REGISTRY_FUNCTION = "void registerKernelPasses(rewriters::PassRegistry& registry) {"
# Step 8: a pass that lowers precision and declares it; verification follows.
PRECISION_HEADER = "quant/linear_bf16.h"
PRECISION_TEST_FILE = "tests/quant/linear_bf16_test.cpp"
PRECISION_REGISTRY_FILE = "quant/register.cpp"
PRECISION_REGISTRY_FUNCTION = "void registerQuantPasses(rewriters::PassRegistry& registry) {"
# The registry function the walkthrough tells the reader to edit.
REGISTRY_FILE = "rewriters/register_generic.cpp"
REGISTRY_FUNCTION = "void registerGenericPasses(PassRegistry& registry) {"


def fail(message):
    print("docs.add_a_pass: FAILED: " + message)
    sys.exit(1)


def extract(doc_path):
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    files, snippets = {}, {}
    for kind, name, body in BLOCK.findall(text):
        target = files if kind == "file" else snippets
        if name in target:
            fail(f"{doc_path}: two blocks are marked '{kind}: {name}'")
        if kind == "file" and (name.startswith("/") or ".." in name.split("/")):
            fail(f"{doc_path}: 'file: {name}' must be a relative path inside the project")
        target[name] = body
    # A marker that the pattern did not pair with a fenced block is a typo.
    markers = len(re.findall(r"^<!-- (?:file|snippet): ", text, re.M))
    if markers != len(files) + len(snippets):
        fail(f"{doc_path}: {markers} markers but {len(files) + len(snippets)} marked code blocks "
             "(a marker must be followed directly by a ``` block)")
    for needed in (PASS_HEADER, TEST_FILE, TUNABLE_HEADER, TUNABLE_TEST_FILE, PRECISION_HEADER, PRECISION_TEST_FILE):
        if needed not in files:
            fail(f"{doc_path} has no block marked 'file: {needed}'")
    for needed in SNIPPETS:
        if needed not in snippets:
            fail(f"{doc_path} has no block marked 'snippet: {needed}'")
    return files, snippets


def pass_class(header_text, header=PASS_HEADER):
    m = re.search(r"class (\w+) : public (?:rewriters::)?Pass\b", header_text)
    if not m:
        fail(f"{header}: no `class NAME : public Pass`")
    return m.group(1)


def pass_name(header_text, header=PASS_HEADER):
    m = re.search(r'std::string name\(\) const override \{ return "([a-z0-9-]+)"; \}', header_text)
    if not m:
        fail(f"{header}: no `name()` returning a kebab-case literal")
    return m.group(1)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run(cmd, what, **kwargs):
    started = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if proc.returncode != 0:
        print(proc.stdout[-20000:])
        fail(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}")
    print(f"docs.add_a_pass: {what}: {time.time() - started:.0f} s")
    return proc.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source_dir")
    ap.add_argument("build_dir")
    ap.add_argument("--work", help="scratch folder (default BUILD_DIR/docs-add-a-pass)")
    ap.add_argument("--prefix", help="an existing ptopt install to build against (skips cmake --install)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("PTOPT_DOCS_JOBS", "2")))
    ap.add_argument("--cmake-arg", action="append", default=[], help="passed to the scratch configure")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder after success")
    args = ap.parse_args()

    doc = os.path.join(args.source_dir, "docs", "adding-a-pass.md")
    files, snippets = extract(doc)
    header = files[PASS_HEADER]
    cls, name = pass_class(header), pass_name(header)
    if "static constexpr const char* kContract" not in header or "return kContract;" not in header:
        fail(f"{PASS_HEADER}: the contract must be `static constexpr const char* kContract` and contract() "
             "must return it")

    # The registry function the page sends the reader to has the shape the
    # snippets assume (one `registry.add` line per pass).
    with open(os.path.join(args.source_dir, REGISTRY_FILE), encoding="utf-8") as f:
        registry_source = f.read()
    if REGISTRY_FUNCTION not in registry_source or "registry.add([] { return std::make_unique<" not in registry_source:
        fail(f"{REGISTRY_FILE} no longer has `{REGISTRY_FUNCTION}` with `registry.add([] {{ return "
             "std::make_unique<...>(); });` lines: update the walkthrough's step 4")

    with open(os.path.join(args.source_dir, TUNABLE_REGISTRY_FILE), encoding="utf-8") as f:
        kernels_registry = f.read()
    if TUNABLE_REGISTRY_FUNCTION not in kernels_registry or "tune::addTunable(registry, " not in kernels_registry:
        fail(f"{TUNABLE_REGISTRY_FILE} no longer has `{TUNABLE_REGISTRY_FUNCTION}` with `tune::addTunable(registry, "
             "...)` lines: update the walkthrough's step 7")
    with open(os.path.join(args.source_dir, PRECISION_REGISTRY_FILE), encoding="utf-8") as f:
        quant_registry = f.read()
    if PRECISION_REGISTRY_FUNCTION not in quant_registry or "registry.add([] { return std::make_unique<" not in quant_registry:
        fail(f"{PRECISION_REGISTRY_FILE} no longer has `{PRECISION_REGISTRY_FUNCTION}` with `registry.add(...)` "
             "lines: update the walkthrough's step 8")
    precision_header = files[PRECISION_HEADER]
    precision_cls = pass_class(precision_header, PRECISION_HEADER)
    precision_name = pass_name(precision_header, PRECISION_HEADER)
    if "rewriters::PassEffects effects(" not in precision_header:
        fail(f"{PRECISION_HEADER}: step 8's pass must declare its effects (`rewriters::PassEffects effects(...)`)")
    tunable_header = files[TUNABLE_HEADER]
    tunable_cls = pass_class(tunable_header, TUNABLE_HEADER)
    tunable_name = pass_name(tunable_header, TUNABLE_HEADER)

    work = os.path.abspath(args.work or os.path.join(args.build_dir, "docs-add-a-pass"))
    shutil.rmtree(work, ignore_errors=True)
    src = os.path.join(work, "src")
    for path, text in files.items():
        write(os.path.join(src, path), text)
    sources = sorted(p for p in files if p.endswith(".cpp") and p != TEST_FILE)

    def registry_function(snippet, include, namespace, function, shaped_like, original,
                          registry_type="rewriters::PassRegistry"):
        """The page's `<snippet>-include` and `<snippet>-line` blocks in a
        function shaped like the folder's registry function."""
        return f"""{snippets[snippet + "-include"].strip()}
#include "{include}"

namespace {namespace} {{
// Shaped like {shaped_like}'s {original}, with the page's lines.
void {function}({registry_type}& registry) {{
{snippets[snippet + "-line"].rstrip()}
}}
}}  // namespace {namespace}
"""

    # The walkthrough's test, as written, plus a check of the registry snippets.
    write(os.path.join(src, "docs_checks.cpp"), f"""// Generated by tests/docs/add_a_pass_test.py from docs/adding-a-pass.md.
#include "{TEST_FILE}"

{registry_function("register", "rewriters/registry.h", "ptopt::rewriters", "registerWalkthroughPasses",
                   REGISTRY_FILE, "registerGenericPasses", "PassRegistry")}
{registry_function("register-tunable", "tune/tunable.h", "ptopt::kernels", "registerWalkthroughKernelPasses",
                   TUNABLE_REGISTRY_FILE, "registerKernelPasses")}
{registry_function("register-lowp", "verify/precision.h", "ptopt::quant", "registerWalkthroughQuantPasses",
                   PRECISION_REGISTRY_FILE, "registerQuantPasses")}
TEST_CASE("docs: the step-8 line registers {precision_name}, whose declared precision verification reads", "[docs]") {{
  ptopt::rewriters::PassRegistry registry;
  ptopt::quant::registerWalkthroughQuantPasses(registry);
  const ptopt::rewriters::PassInfo* info = registry.find("{precision_name}");
  REQUIRE(info != nullptr);
  CHECK(info->contract == std::string(ptopt::quant::{precision_cls}::kContract));
  ptopt::rewriters::PassContext ctx;
  // The verify library, built before this pass existed, reads its precision
  // from the registry by the pipeline alone.
  CHECK(ptopt::verify::lowestPrecisionIntroduced(ptopt::rewriters::parsePipeline("{precision_name}", registry),
                                                 registry, ctx) == c10::ScalarType::BFloat16);
}}

TEST_CASE("docs: the step-7 lines register {tunable_name} and its tunable", "[docs]") {{
  ptopt::rewriters::PassRegistry registry;
  ptopt::kernels::registerWalkthroughKernelPasses(registry);
  const ptopt::rewriters::PassInfo* info = registry.find("{tunable_name}");
  REQUIRE(info != nullptr);
  CHECK(info->contract == std::string(ptopt::kernels::{tunable_cls}::kContract));
  const auto tunables = ptopt::tune::tunables(registry);
  REQUIRE(tunables.size() == 1);
  CHECK(tunables[0]->pass == "{tunable_name}");
}}

TEST_CASE("docs: the registry line registers {name} with its contract", "[docs]") {{
  ptopt::rewriters::PassRegistry registry;
  ptopt::rewriters::registerWalkthroughPasses(registry);
  const ptopt::rewriters::PassInfo* info = registry.find("{name}");
  REQUIRE(info != nullptr);
  CHECK(info->contract == std::string(ptopt::rewriters::{cls}::kContract));
  CHECK_FALSE(info->description.empty());
  CHECK(registry.create("{name}")->name() == "{name}");
}}
""")
    write(os.path.join(src, "catch_main.cpp"), "#define CATCH_CONFIG_MAIN\n#include <catch2/catch.hpp>\n")
    write(os.path.join(src, "CMakeLists.txt"), f"""# Generated by tests/docs/add_a_pass_test.py: the walkthrough's files, out of tree.
cmake_minimum_required(VERSION 3.18)
project(ptopt_walkthrough LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(ptopt REQUIRED)
set(CMAKE_CXX_FLAGS "${{CMAKE_CXX_FLAGS}} ${{TORCH_CXX_FLAGS}}")
find_package(Catch2 QUIET)
if(NOT Catch2_FOUND)
  find_path(CATCH2_INCLUDE_DIR catch2/catch.hpp REQUIRED)
  add_library(Catch2::Catch2 INTERFACE IMPORTED)
  target_include_directories(Catch2::Catch2 INTERFACE ${{CATCH2_INCLUDE_DIR}})
endif()
add_executable(walkthrough_tests catch_main.cpp docs_checks.cpp {' '.join(sources)})
target_include_directories(walkthrough_tests PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}})
target_compile_options(walkthrough_tests PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(walkthrough_tests PRIVATE ptopt::api Catch2::Catch2)
""")

    prefix = os.path.abspath(args.prefix) if args.prefix else os.path.join(work, "prefix")
    if not args.prefix:
        run(["cmake", "--install", args.build_dir, "--prefix", prefix], "cmake --install")
    build = os.path.join(work, "build")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    # No optimization: the test is about the walkthrough, and -O0 compiles fastest.
    run(["cmake", "-S", src, "-B", build, *generator, f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=",
         *args.cmake_arg], "configure")
    run(["cmake", "--build", build, "-j", str(args.jobs)], "build (one pass, one test)")
    out = run([os.path.join(build, "walkthrough_tests")], "walkthrough_tests")
    print(out.strip().splitlines()[-1] if out.strip() else "")
    m = re.search(r"in (\d+) test cases", out)
    if not m or int(m.group(1)) < 13:
        fail("expected the walkthrough's test cases and the registry check to run:\n" + out)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"docs.add_a_pass: the walkthrough builds and its {m.group(1)} test cases pass")


if __name__ == "__main__":
    main()
