#!/usr/bin/env python3
"""The pass folders read operator arguments by name and edit graphs through
the logged rewriter only (issue 35, part 5; DESIGN.md's pass contract).

Fails, naming file:line, on
  - a positional argument read or write: `arg(2)`, `argValue(0)`,
    `setArg(n, 1, ...)`: passes read arguments through op views
    (ir/op_views.h) by their schema names;
  - an unlogged edit: a node destroyed, moved, inserted or re-argued, uses
    replaced, or the constant table written, other than through ir::Rewriter
    (ir/rewriter.h: call/insert/replace/erase/setArg/addConstant/...), whose
    edit log --print-changed, --dot-dir and the edit-log self-checks read;
  - a value's metadata written directly (`v->meta() = m`,
    `v->meta().shape = s`) instead of `rw.setMeta(v, m)`, except on a node
    not yet in the graph, whose logged insert is the edit: such a line says
    `// lint: detached (...)`;

and on a pass's name spelled in the code of ir/ (the layer under every
pass: a lowering's inverse is the pass's raise step, ir/raise.h, and ir/
names no pass; comments may), or of the layers above the passes (driver/,
api/, verify/, tools/, measure/, target/, draw/ and the Python binding),
which ask a pass what it does (rewriters::PassEffects, declared next to its
options) instead of knowing it by name. A JSON key (`j["quantize"]`, a
report's section) is not a use; a line that spells a pass's name for another
reason says so: `// lint: not a pass (why)`.

And on a hidden switch: `getenv("PTOPT_...")` in the library (every folder
but the command line's tools/ and the Python package): a setting is a
request option (driver/request.h) that the front ends fill from their flags,
arguments and, where documented, environment variables. And on an
`#include "tools/..."` in the library or the Python binding: what the faces
share lives in session/, not in the command line's folder.

And on a file of a pass folder over 600 lines: split it by job.

A line that must do otherwise says why on the line itself:
`// lint: positional (why)` or `// lint: raw edit (why)`.

Usage: pass_sources.py SOURCE_DIR   (first checks itself on planted lines)
"""
import pathlib
import re
import sys
import tempfile

PASS_FOLDERS = ["fusion", "kernels", "layout", "quant", "rewriters", "tune"]
# Folders that read operator arguments but are no pass: by name too.
READ_BY_NAME = ["verify"]
POSITIONAL = re.compile(r"\b(arg|argValue)\(\s*\d+\s*\)|\bsetArg\(\s*[^,()]+,\s*\d+\s*,")
# Raw edits: member calls on a node or value, or the constant table.
RAW_EDIT = re.compile(
    r"(->|\.)(destroy|replaceAllUsesWith|insertBefore|insertAfter|moveBefore|moveAfter|setArg|addArg|removeArg)\("
    r"|constants\(\)\.(set|erase)\(")
# Metadata writes: an assignment to meta() or one of its fields, or a reset.
META_EDIT = re.compile(r"(->|\.)meta\(\)(\.\w+)*\s*=(?!=)|(->|\.)meta\(\)(\.\w+)*\.(reset|emplace)\(")
# Calls on the rewriter are the logged ones.
REWRITER_CALL = re.compile(r"\b(rw_?|rewriter_?|rw\(\))(->|\.)")


def strip_comment(line):
    i = line.find("//")
    return line if i < 0 else line[:i]


def check(root):
    root = pathlib.Path(root)
    if not (root / "ir").is_dir():
        raise SystemExit(f"pass_sources: {root} has no ir/ folder (give the source root)")
    problems = []
    for folder in READ_BY_NAME:
        for path in sorted((root / folder).glob("*.[ch]*")):
            for no, line in enumerate(path.read_text().splitlines(), 1):
                if POSITIONAL.search(strip_comment(line)) and "lint: positional" not in line:
                    problems.append(f"{path.relative_to(root)}:{no}: positional argument access (use an op view): "
                                    f"{line.strip()}")
    for folder in PASS_FOLDERS:
        for path in sorted((root / folder).glob("*.[ch]*")):
            for no, line in enumerate(path.read_text().splitlines(), 1):
                code = strip_comment(line)
                where = f"{path.relative_to(root)}:{no}"
                if POSITIONAL.search(code) and "lint: positional" not in line:
                    problems.append(f"{where}: positional argument access (use an op view): {line.strip()}")
                if META_EDIT.search(code) and "lint: detached" not in line and "lint: raw edit" not in line:
                    problems.append(f"{where}: metadata written outside the rewriter (rw.setMeta): {line.strip()}")
                for m in RAW_EDIT.finditer(code):
                    before = code[: m.start()]
                    if REWRITER_CALL.search(before[-12:] + "."):
                        continue
                    if "lint: raw edit" in line:
                        continue
                    problems.append(f"{where}: edit outside the rewriter's log: {line.strip()}")
                    break
    problems += names_no_pass(root)
    problems += no_hidden_switches(root)
    problems += short_pass_files(root)
    return problems


MAX_PASS_FILE_LINES = 600


def short_pass_files(root):
    """A pass file that grew past MAX_PASS_FILE_LINES is split by job (the
    cast pass: its face in cast.cpp, the assignment in cast_assign.cpp, the
    materialization in cast_values.cpp)."""
    problems = []
    for folder in PASS_FOLDERS:
        for path in sorted((root / folder).glob("*.[ch]*")):
            lines = len(path.read_text().splitlines())
            if lines > MAX_PASS_FILE_LINES:
                problems.append(f"{path.relative_to(root)}:{lines}: {lines} lines, over the {MAX_PASS_FILE_LINES} a "
                                f"pass file may have (split it by job)")
    return problems


PASS_NAME = re.compile(r'name\(\) const override \{ return "([^"]+)"')


# Folders (and files) that name no pass: ir/ under the passes, the
# driver, the library's faces and the binding above them.
NO_PASS_NAMES = ["ir", "driver", "api", "verify", "tools", "measure", "target", "draw", "session",
                 "python/ptopt_module.cpp"]
JSON_KEY = re.compile(r'\[\s*"[^"]*"\s*\]')


def names_no_pass(root):
    names = set()
    for folder in PASS_FOLDERS:
        for path in (root / folder).glob("*.h"):
            names.update(PASS_NAME.findall(path.read_text()))
    problems = []
    for entry in NO_PASS_NAMES:
        where = root / entry
        paths = [where] if where.is_file() else sorted(where.glob("*.[ch]*")) if where.is_dir() else []
        for path in paths:
            for no, line in enumerate(path.read_text().splitlines(), 1):
                if "lint: not a pass" in line:
                    continue
                code = JSON_KEY.sub("[]", strip_comment(line))
                for name in sorted(names):
                    if f'"{name}"' in code or f'"{name}{{' in code:
                        hint = ("register a raise step next to the pass instead" if entry == "ir"
                                else "ask the pass's declared effects (rewriters::PassEffects) instead")
                        problems.append(f"{path.relative_to(root)}:{no}: {entry} names the pass '{name}' "
                                        f"({hint}): {line.strip()}")
    return problems


LIBRARY = ["ir", "rewriters", "fusion", "layout", "quant", "kernels", "tune", "target", "measure", "verify", "driver",
           "api", "draw", "session"]
# The command line's own folder: the library and the binding include none of
# it (what the faces share lives in session/).
CLI_INCLUDE = re.compile(r'#include\s+"tools/')
HIDDEN_SWITCH = re.compile(r'getenv\(\s*"PTOPT_')


def no_hidden_switches(root):
    problems = []
    for folder in LIBRARY + ["python/ptopt_module.cpp"]:
        where = root / folder
        paths = [where] if where.is_file() else sorted(where.glob("*.[ch]*")) if where.is_dir() else []
        for path in paths:
            for no, line in enumerate(path.read_text().splitlines(), 1):
                if folder in LIBRARY and HIDDEN_SWITCH.search(strip_comment(line)):
                    problems.append(f"{path.relative_to(root)}:{no}: an environment switch in the library (make it a "
                                    f"request option the front ends set): {line.strip()}")
                if CLI_INCLUDE.search(line):
                    problems.append(f"{path.relative_to(root)}:{no}: includes the command line's folder (move what "
                                    f"the faces share into session/): {line.strip()}")
    return problems


PLANTED = """\
  ir::Value* x = n->arg(0).value();          // flagged: positional
  auto w = n->argValue(1);                   // flagged: positional
  n->setArg(2, y);                           // flagged: raw edit
  rw.setArg(n, 1, y);                        // flagged: positional (through the rewriter, still by position)
  g.constants().set(name, t);                // flagged: raw edit
  old->replaceAllUsesWith(v);                // flagged: raw edit
  rw.replaceAllUsesWith(old, v);             // fine: logged
  rw_.setArg(n, conv->index("bias"), b);     // fine: by name, logged
  auto b = view->arg("bias");                // fine: by name
  n->arg(i);  // lint: positional (an index found by name above)
  y->meta() = x->meta();                     // flagged: metadata outside the rewriter
  rw.setMeta(y, m);                          // fine: logged
  k->output()->meta().shape = s;  // lint: detached (inserted below)
  if (a->meta() == b->meta()) return;        // fine: a comparison
"""


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "fusion").mkdir()
        (root / "ir").mkdir()
        (root / "fusion" / "planted.cpp").write_text(PLANTED)
        (root / "fusion" / "planted.h").write_text(
            '  std::string name() const override { return "planted-pass"; }\n')
        (root / "fusion" / "long.cpp").write_text("int x;\n" * (MAX_PASS_FILE_LINES + 1))
        (root / "fusion" / "short.cpp").write_text("int x;\n" * MAX_PASS_FILE_LINES)
        (root / "ir" / "planted.cpp").write_text(
            '  if (pass == "planted-pass") undo(g);   // flagged: ir/ names a pass\n'
            '  // the inverse of "planted-pass" (fine: a comment)\n')
        (root / "driver").mkdir()
        (root / "driver" / "planted.cpp").write_text(
            '  dropPass(p, "planted-pass");   // flagged: the driver names a pass\n'
            '  parse("planted-pass{k=v}");    // flagged too\n'
            '  j["planted-pass"] = report;    // fine: a JSON key\n'
            '  label = "planted-pass";  // lint: not a pass (a label that happens to match)\n'
            '  if (std::getenv("PTOPT_PLANTED")) skip();   // flagged: a hidden switch\n'
            '#include "tools/session.h"                   // flagged: the library includes the CLI\n')
        found = check(d)
    flagged = sorted(p.split(":")[0] + ":" + p.split(":")[1] for p in found)
    expected = sorted([f"fusion/planted.cpp:{i}" for i in [1, 2, 3, 4, 5, 6, 11]] + ["ir/planted.cpp:1"] +
                      [f"fusion/long.cpp:{MAX_PASS_FILE_LINES + 1}"] +
                      ["driver/planted.cpp:1", "driver/planted.cpp:2", "driver/planted.cpp:5", "driver/planted.cpp:6"])
    if flagged != expected:
        print("pass_sources: the self-test flagged", flagged, "expected", expected)
        print("\n".join(found))
        return False
    return True


def main(root):
    if not self_test():
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    print(f"pass_sources: {len(problems)} problem(s) in {', '.join(PASS_FOLDERS + NO_PASS_NAMES)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
