#!/usr/bin/env python3
"""Groups the public headers by module: include/strata/<name> -> include/strata/<module>/<name>.

The module of a header is the one tools/check_layering.py assigns (docs/architecture.md,
"Module order"): the src/<module>/ holding a source of the header's name, else the `owner`
line of the layering block. Private headers (src/<module>/*.h) stay beside their sources.
Then every reference is rewritten:
  - "strata/<name>" and <strata/<name>> (#include, __has_include) in C, C++ and CUDA
    sources under src/,
    include/, tests/, python/, examples/, bench/, runtime/ and tools/;
  - the path include/strata/<name> in any text file there and in docs/, cmake/, README.md,
    NOTES.md and CMakeLists.txt (comments, docs, test fixtures);
  - the CMake globs of the public headers (include/strata/*.h, *.def) to one level deeper.
Files are moved with `git mv` when the tree is a git checkout, else renamed.

Usage: tools/group_headers.py [--root DIR] [--dry-run]
Exit status: 0 done (or nothing to do), 2 a header no module owns (nothing is changed).
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layering  # noqa: E402  (the one definition of modules and owners)

CODE_DIRS = ["src", "include", "tests", "python", "examples", "bench", "runtime", "tools"]
TEXT_DIRS = CODE_DIRS + ["docs", "cmake", "scripts"]
TEXT_FILES = ["README.md", "NOTES.md", "CMakeLists.txt", "pyproject.toml", "Makefile"]
CODE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".def", ".in")
TEXT_EXT = CODE_EXT + (".md", ".txt", ".cmake", ".py", ".toml", ".sh", ".json", ".strata")


def mapping(root):
    """{name: module} for every header directly in include/strata/."""
    order, _, owners = check_layering.read_layering(root)
    dirs = check_layering.module_dirs(root, order)
    inc = os.path.join(root, "include", "strata")
    result, orphans = {}, []
    for n in sorted(os.listdir(inc)):
        if not os.path.isfile(os.path.join(inc, n)):
            continue
        mod = check_layering.public_owner(root, n, dirs, owners)
        if mod is None:
            orphans.append(n)
        else:
            result[n] = mod
    return result, orphans


def walk(root, dirs, files, exts):
    for d in dirs:
        for base, subdirs, names in os.walk(os.path.join(root, d)):
            subdirs[:] = [s for s in subdirs if s not in (".git", "build", "__pycache__")
                          and not s.startswith("build")]
            for n in names:
                if n.endswith(exts):
                    yield os.path.join(base, n)
    for f in files:
        p = os.path.join(root, f)
        if os.path.isfile(p):
            yield p


def rewrite(text, table, code):
    alt = "|".join(re.escape(n) for n in sorted(table, key=len, reverse=True))
    if not alt:
        return text
    # Paths: include/strata/<name> (not already grouped).
    text = re.sub(r"include/strata/(" + alt + r")(?!\w)",
                  lambda m: f"include/strata/{table[m.group(1)]}/{m.group(1)}", text)
    # In sources every "strata/<name>" or <strata/<name>> (#include, __has_include); in other
    # text (docs, scripts) the #include lines of examples.
    lead = r'(["<])' if code else r'(#\s*include\s*["<])'
    text = re.sub(lead + r"strata/(" + alt + r')([">])',
                  lambda m: f"{m.group(1)}strata/{table[m.group(2)]}/{m.group(2)}{m.group(3)}",
                  text)
    # CMake globs of the public headers.
    text = text.replace("include/strata/*.h", "include/strata/*/*.h")
    text = text.replace("include/strata/*.def", "include/strata/*/*.def")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    try:
        table, orphans = mapping(root)
    except check_layering.LayeringError as e:
        print(f"group_headers: {e}", file=sys.stderr)
        return 2
    if orphans:
        for n in orphans:
            print(f"group_headers: include/strata/{n}: no module owns it (add a source of its "
                  "name to a src/<module>/ or an `owner:` line to docs/architecture.md)",
                  file=sys.stderr)
        return 2
    for n, mod in table.items():
        print(f"include/strata/{n} -> include/strata/{mod}/{n}")
    if not table:
        print("group_headers: nothing to do (no header directly in include/strata/)")
        return 0
    if args.dry_run:
        return 0
    is_git = subprocess.run(["git", "-C", root, "rev-parse", "--is-inside-work-tree"],
                            capture_output=True).returncode == 0
    for n, mod in table.items():
        src = os.path.join("include", "strata", n)
        dst_dir = os.path.join(root, "include", "strata", mod)
        os.makedirs(dst_dir, exist_ok=True)
        dst = os.path.join("include", "strata", mod, n)
        tracked = is_git and subprocess.run(
            ["git", "-C", root, "ls-files", "--error-unmatch", src],
            capture_output=True).returncode == 0
        if tracked:
            subprocess.run(["git", "-C", root, "mv", src, dst], check=True)
        else:
            os.rename(os.path.join(root, src), os.path.join(root, dst))
    changed = 0
    for path in walk(root, TEXT_DIRS, TEXT_FILES, TEXT_EXT):
        rel = os.path.relpath(path, root)
        if rel.startswith(os.path.join("tools", "tests") + os.sep) or rel in (
                os.path.join("tools", "group_headers.py"),
                os.path.join("tools", "check_layering.py")):
            continue  # the scripts and their fixtures describe both layouts
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        new = rewrite(text, table, path.endswith(CODE_EXT))
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            changed += 1
    print(f"group_headers: moved {len(table)} header(s), rewrote {changed} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
