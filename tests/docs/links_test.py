#!/usr/bin/env python3
"""Every link in README.md and docs/ resolves: a relative link (or image)
names a file or folder that exists in the checkout, and a `#anchor` names a
heading of the Markdown file it points to (GitHub's anchors: the heading in
lower case, punctuation dropped, spaces as '-'). Links to other sites are
not fetched (CI has no network to rely on); code blocks are skipped.

Usage: links_test.py SOURCE_DIR   (first checks itself on planted links)
"""
import pathlib
import re
import sys
import tempfile

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
CODE_BLOCK = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def anchor_of(heading):
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for h in HEADING.findall(CODE_BLOCK.sub("", path.read_text(encoding="utf-8"))):
        a = anchor_of(h)
        n = seen.get(a, 0)
        out.add(a if n == 0 else f"{a}-{n}")  # GitHub numbers repeated headings
        seen[a] = n + 1
    return out


def documents(root):
    root = pathlib.Path(root)
    return [p for p in [root / "README.md"] + sorted((root / "docs").rglob("*.md")) if p.is_file()]


def check(root):
    problems = []
    cache = {}
    for doc in documents(root):
        text = INLINE_CODE.sub("", CODE_BLOCK.sub("", doc.read_text(encoding="utf-8")))
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc.resolve()
            where = f"{doc.relative_to(root)}: [{target}]"
            if not dest.exists():
                problems.append(f"{where}: no file {path}")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    problems.append(f"{where}: {dest.name} has no heading for #{anchor}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("# Title\n\n## Two words, here\n\n## Two words, here\n")
        (root / "README.md").write_text(
            "[ok](docs/a.md) [ok](docs/a.md#two-words-here) [ok](docs/a.md#two-words-here-1) [ok](#readme)\n"
            "[web](https://example.org/x) ![img](docs/missing.png) [bad](docs/b.md) [bad](docs/a.md#three)\n"
            "`[not a link](nowhere.md)`\n\n# Readme\n\n```\n[in code](nowhere.md)\n```\n")
        found = check(root)
    expected = ["docs/missing.png", "docs/b.md", "#three"]
    if len(found) != 3 or not all(any(e in p for p in found) for e in expected):
        print("links_test: the self-test found", found)
        return False
    return True


def main(root):
    if not self_test():
        return 1
    problems = check(root)
    for p in problems:
        print(p)
    print(f"links_test: {len(problems)} broken link(s) in {len(documents(root))} documents")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
