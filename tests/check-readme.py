#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Style check: README's "How the code is organised" names every object.

Every constructor (`pps_<object>_new`) declared in a header of a library folder
must appear in that section, so the section keeps matching the headers.
Usage: check-readme.py SOURCE_ROOT
"""
import pathlib
import re
import sys

FOLDERS = ["common", "config", "wire", "codec", "prioritizer", "adapt", "server", "client", "call", "gst"]
SECTION = "## How the code is organised"


def main():
    root = pathlib.Path(sys.argv[1])
    readme = (root / "README.md").read_text()
    start = readme.find(SECTION)
    if start < 0:
        print("check-readme: README.md has no '%s' section" % SECTION)
        return 1
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start:end if end > 0 else len(readme)]
    missing = []
    for folder in FOLDERS:
        for header in sorted((root / folder).glob("*.h")):
            for name in sorted(set(re.findall(r"\b(pps_[a-z0-9_]+_new)\s*\(", header.read_text()))):
                if name not in section:
                    missing.append("%s (%s)" % (name, header.relative_to(root)))
    if missing:
        print("check-readme: constructors missing from README '%s':" % SECTION)
        for m in missing:
            print("  " + m)
        return 1
    print("check-readme: every constructor in %d folders is named in the README" % len(FOLDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
