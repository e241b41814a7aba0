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
    edit log --print-changed, --dot-dir and the edit-log self-checks read.

A line that must do otherwise says why on the line itself:
`// lint: positional (why)` or `// lint: raw edit (why)`.

Usage: pass_sources.py SOURCE_DIR   (first checks itself on planted lines)
"""
import pathlib
import re
import sys
import tempfile

PASS_FOLDERS = ["fusion", "layout", "quant", "rewriters", "tune"]
POSITIONAL = re.compile(r"\b(arg|argValue)\(\s*\d+\s*\)|\bsetArg\(\s*[^,()]+,\s*\d+\s*,")
# Raw edits: member calls on a node or value, or the constant table.
RAW_EDIT = re.compile(
    r"(->|\.)(destroy|replaceAllUsesWith|insertBefore|insertAfter|moveBefore|moveAfter|setArg|addArg|removeArg)\("
    r"|constants\(\)\.(set|erase)\(")
# Calls on the rewriter are the logged ones.
REWRITER_CALL = re.compile(r"\b(rw_?|rewriter_?|rw\(\))(->|\.)")


def strip_comment(line):
    i = line.find("//")
    return line if i < 0 else line[:i]


def check(root):
    root = pathlib.Path(root)
    problems = []
    for folder in PASS_FOLDERS:
        for path in sorted((root / folder).glob("*.[ch]*")):
            for no, line in enumerate(path.read_text().splitlines(), 1):
                code = strip_comment(line)
                where = f"{path.relative_to(root)}:{no}"
                if POSITIONAL.search(code) and "lint: positional" not in line:
                    problems.append(f"{where}: positional argument access (use an op view): {line.strip()}")
                for m in RAW_EDIT.finditer(code):
                    before = code[: m.start()]
                    if REWRITER_CALL.search(before[-12:] + "."):
                        continue
                    if "lint: raw edit" in line:
                        continue
                    problems.append(f"{where}: edit outside the rewriter's log: {line.strip()}")
                    break
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
"""


def self_test():
    with tempfile.TemporaryDirectory() as d:
        (pathlib.Path(d) / "fusion").mkdir()
        (pathlib.Path(d) / "fusion" / "planted.cpp").write_text(PLANTED)
        found = check(d)
    flagged = sorted(int(p.split(":")[1]) for p in found)
    if flagged != [1, 2, 3, 4, 5, 6]:
        print("pass_sources: the self-test flagged lines", flagged, "of the planted file, expected 1-6:")
        print("\n".join(found))
        return False
    return True


def main(root):
    if not self_test():
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    print(f"pass_sources: {len(problems)} problem(s) in {', '.join(PASS_FOLDERS)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
