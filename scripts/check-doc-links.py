#!/usr/bin/env python3
"""Every link in the project's Markdown resolves: relative links and images name files or folders
that exist (an anchor after '#' is not checked; web addresses are not followed).

Usage: check-doc-links.py [SOURCE_DIR]   (ctest runs it as docs.links)
Prints each broken link as FILE:LINE: TARGET and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")


def markdown_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return [os.path.join(root, f) for f in out.stdout.split()]
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
        found += [os.path.join(d, f) for f in files if f.endswith(".md")]
    return found


def broken_links(path):
    bad = []
    fence = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
            targets = LINK.findall(line) + REFERENCE.findall(line)
            for t in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", t) or t.startswith("#"):
                    continue
                rel = t.split("#", 1)[0]
                if rel and not os.path.exists(os.path.join(os.path.dirname(path), rel)):
                    bad.append((n, t))
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = markdown_files(root)
    count = 0
    for path in sorted(files):
        for n, t in broken_links(path):
            print(f"{os.path.relpath(path, root)}:{n}: {t}")
            count += 1
    print(f"doc links: {len(files)} files, {count} broken")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
