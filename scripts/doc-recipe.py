#!/usr/bin/env python3
"""Turns a recipe in the docs into the shell script a reader would type, so a test can run it
verbatim: `scripts/doc-recipe.py FILE SECTION` prints it.

The recipe is the `## SECTION` of the Markdown FILE (up to the next `## ` heading). Its ```sh
blocks are the commands, in order, as written. Any other code block is a file the reader saves:
the nearest line before it that says "Save this as `NAME`" names it, and the script writes it
there (relative to the folder the commands have reached). Nothing else is added."""

import re
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, section = sys.argv[1], sys.argv[2]
    lines = open(path, encoding="utf-8").read().split("\n")
    try:
        start = lines.index("## " + section)
    except ValueError:
        print(f"{path}: no section '## {section}'", file=sys.stderr)
        return 1
    out, name, lang, block = [], None, None, None
    for line in lines[start + 1 :]:
        if block is None and line.startswith("## "):
            break
        if block is None:
            m = re.match(r"^```([A-Za-z0-9_+-]*)$", line)
            if m:
                lang, block = m.group(1), []
                continue
            saved = re.search(r"Save this as `([^`]+)`", line)
            if saved:
                name = saved.group(1)
            continue
        if line == "```":
            if lang == "sh":
                out.extend(block)
            else:
                if not name:
                    print(f"{path}: a ```{lang} block with no 'Save this as `NAME`' before it", file=sys.stderr)
                    return 1
                out.append(f"cat > '{name}' <<'AGENTAO_RECIPE_EOF'")
                out.extend(block)
                out.append("AGENTAO_RECIPE_EOF")
                name = None
            block = None
            continue
        block.append(line)
    if block is not None:
        print(f"{path}: an unterminated code block in '## {section}'", file=sys.stderr)
        return 1
    if not out:
        print(f"{path}: '## {section}' has no commands", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
