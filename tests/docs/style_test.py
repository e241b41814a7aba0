#!/usr/bin/env python3
"""The README stays a newcomer's two screens and the documentation is
written for users:

* README.md has at most 300 lines; within its first 80 it shows how to
  install (`pip install`), one `ptopt IN OUT` command and one
  `ptopt.optimize` call; it embeds a chart that exists; it keeps the two
  set-up commands (scripts/quickstart.sh, scripts/test.sh: the test command
  CI runs through .ci/run) and says which PyTorch the quickstart uses.
* No Markdown page (README.md, docs/**/*.md) refers to issue numbers or
  work history ("issue 34", "#37", "wave-3"); links to another project's
  issues (pytorch/pytorch#141116) are fine.

Usage: style_test.py SOURCE_DIR   (first checks itself on planted pages)
"""
import pathlib
import re
import sys
import tempfile

README_MAX_LINES = 300
FIRST_SCREEN = 80
HISTORY = [
    re.compile(r"\b[Ii]ssues? ?#?\d+"),          # issue 34, Issue #37, issues 34
    re.compile(r"(?<![\w/.-])#\d{2,}\b"),        # #37 (but not owner/repo#123, not #abc)
    re.compile(r"\b[Ww]ave[- ]?\d+\b"),          # wave-3, wave 3
    re.compile(r"\b(this|the) session\b"),       # this session's changes
]
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def pages(root):
    root = pathlib.Path(root)
    return [p for p in [root / "README.md"] + sorted((root / "docs").rglob("*.md")) if p.is_file()]


def check(root):
    root = pathlib.Path(root)
    problems = []
    readme = root / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    if len(lines) > README_MAX_LINES:
        problems.append(f"README.md: {len(lines)} lines, more than {README_MAX_LINES}")
    head = "\n".join(lines[:FIRST_SCREEN])
    if "pip install" not in head:
        problems.append(f"README.md: no `pip install` in the first {FIRST_SCREEN} lines")
    if not re.search(r"^\$? ?ptopt \S+\.pt2? \S+\.pt2?\b", head, re.M):
        problems.append(f"README.md: no `ptopt IN OUT` command in the first {FIRST_SCREEN} lines")
    if "ptopt.optimize(" not in head:
        problems.append(f"README.md: no `ptopt.optimize(` call in the first {FIRST_SCREEN} lines")
    text = "\n".join(lines)
    for command in ("./scripts/quickstart.sh", "./scripts/test.sh"):
        if command not in text:
            problems.append(f"README.md: the set-up command {command} is missing")
    if not re.search(r"PyTorch \d+\.\d+", text):
        problems.append("README.md: does not say which PyTorch (e.g. 'PyTorch 1.13')")
    images = [m.group(1) for m in IMAGE.finditer(text) if not re.match(r"^[a-z]+:", m.group(1))]
    if not any((root / i).is_file() for i in images):
        problems.append("README.md: embeds no chart (an image file of the checkout)")
    for page in pages(root):
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for pattern in HISTORY:
                m = pattern.search(line)
                if m:
                    problems.append(f"{page.relative_to(root)}:{n}: '{m.group(0)}': "
                                    "no issue numbers or work history in user documentation")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "docs" / "img").mkdir(parents=True)
        (root / "docs" / "img" / "c.svg").write_text("<svg/>")
        good = ("# x\n\npip install .\n\n```\n$ ptopt in.pt out.pt -O1\n```\n\nfast = ptopt.optimize(m)\n\n"
                "./scripts/quickstart.sh and ./scripts/test.sh, PyTorch 1.13.\n\n![c](docs/img/c.svg)\n"
                "See pytorch/pytorch#141116 and the colour #abc.\n")
        (root / "README.md").write_text(good)
        (root / "docs" / "a.md").write_text("Fine text.\n")
        if check(root):
            print("style_test: the self-test flagged a good page:", check(root))
            return False
        (root / "README.md").write_text("# x\n" + "\n" * 400 + good)
        (root / "docs" / "a.md").write_text("Since issue 34 and #37, the wave-3 run.\n")
        found = check(root)
    expected = ["more than", "no `pip install`", "no `ptopt IN OUT`", "no `ptopt.optimize(`",
                "'issue 34'", "'#37'", "'wave-3'"]
    if not all(any(e in p for p in found) for e in expected):
        print("style_test: the self-test found", found)
        return False
    return True


def main(root):
    if not self_test():
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    print(f"style_test: {len(problems)} problem(s) in {len(pages(root))} pages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
