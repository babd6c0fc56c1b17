#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Docs check: every relative link in README.md and docs/*.md resolves.

A link [text](target) or image ![alt](target) whose target is not a URL must
name a file or folder of the tree (relative to the page that holds it), and a
#fragment on a Markdown page must be one of that page's headings (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens). Links inside code
blocks and inline code are not links.
Usage: check-links.py SOURCE_ROOT
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text):
    """The page's lines outside fenced and indented code blocks, with their numbers."""
    fenced = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            previous_blank = False
            continue
        if fenced:
            continue
        indented = line.startswith("    ") or line.startswith("\t")
        if indented and previous_blank:
            continue  # an indented code block (stays one while lines stay indented)
        previous_blank = not line.strip() or (indented and previous_blank)
        yield number, line


def anchor(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        names = set()
        for _, line in prose_lines(path.read_text()):
            m = HEADING.match(line)
            if not m:
                continue
            base = anchor(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            names.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = names
    return cache[path]


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    broken = []
    count = 0
    for page in pages:
        for number, line in prose_lines(page.read_text()):
            line = re.sub(r"`[^`]*`", "", line)  # inline code is not a link
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, https:, mailto:, ...
                count += 1
                where = "%s:%d: %s" % (page.relative_to(root), number, target)
                path_part, _, fragment = target.partition("#")
                dest = (page.parent / path_part).resolve() if path_part else page
                if root not in dest.parents and dest != root:
                    broken.append(where + " (outside the repository)")
                    continue
                if not dest.exists():
                    broken.append(where + " (no such file)")
                    continue
                if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                    broken.append(where + " (no heading with this anchor)")
    if broken:
        print("check-links: broken relative links:")
        for b in broken:
            print("  " + b)
        return 1
    print("check-links: %d relative links in %d pages resolve" % (count, len(pages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
