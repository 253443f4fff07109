#!/usr/bin/env python3
"""Checks the module order of strata's sources (docs/architecture.md, "Module order").

The order, the interface headers and the owners of headers without a source of their own
name are read from the ```layering block of docs/architecture.md, the one place they are
defined. Every quoted #include of a file in src/<module>/, include/strata/, tools/strata/
(module `cli`) and python/src/ (module `python`) is classified:

  "strata/<name>"           a public header; its module is the src/<m>/ holding <stem>.cc
                            (or <stem>.cu), else the `owner` line naming it; after headers are
                            grouped by module (tools/group_headers.py), "strata/<m>/<name>"
                            belongs to <m>.
  "<m>/<path>"              a private header of module <m> (src/<m>/<path>); other modules may
                            include it only when an `interface` pattern lists it.

A file may include headers of its own module and of modules before it in the order; anything
else is a violation. Exit status: 0 clean, 1 violations (each printed as
"file:line: message"), 2 a missing or malformed layering block.

Usage: tools/check_layering.py [--root DIR]
"""
import argparse
import fnmatch
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Directories that are modules without being src/<module>/.
EXTRA_MODULE_DIRS = {"cli": "tools/strata", "python": "python/src"}


class LayeringError(Exception):
    pass


def read_layering(root):
    """Returns (order, interfaces, owners) from the ```layering block of the architecture page."""
    path = os.path.join(root, "docs", "architecture.md")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise LayeringError(f"{path}: cannot read: {e}")
    m = re.search(r"^```layering\n(.*?)^```", text, re.M | re.S)
    if not m:
        raise LayeringError(f"{path}: no ```layering block (the module order)")
    order, interfaces, owners = [], [], {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, rest = line.partition(":")
        words = rest.split()
        if key == "order":
            order = [w for w in words if w != "<"]
        elif key == "interface":
            interfaces.extend(words)
        elif key == "owner" and len(words) == 2:
            owners[words[0]] = words[1]
        else:
            raise LayeringError(f"{path}: layering block line {n}: expected `order: a < b < …`, "
                                f"`interface: PATTERN…` or `owner: HEADER MODULE`, got `{line}`")
    if not order:
        raise LayeringError(f"{path}: the layering block has no `order:` line")
    for h, mod in owners.items():
        if mod not in order:
            raise LayeringError(f"{path}: owner of {h}: `{mod}` is not in the order")
    return order, interfaces, owners


def module_dirs(root, order):
    dirs = {}
    for mod in order:
        d = EXTRA_MODULE_DIRS.get(mod, os.path.join("src", mod))
        if os.path.isdir(os.path.join(root, d)):
            dirs[mod] = d
    return dirs


def public_owner(root, name, dirs, owners, order=()):
    """The module of include/strata/<name>, or None."""
    first, _, rest = name.partition("/")
    if rest and (first in dirs or first in order):  # grouped: strata/<module>/<header>
        return first
    if name in owners:
        return owners[name]
    stem = os.path.splitext(os.path.basename(name))[0]
    found = [m for m, d in dirs.items() if not m in EXTRA_MODULE_DIRS and any(
        os.path.exists(os.path.join(root, d, stem + ext)) for ext in (".cc", ".cu"))]
    return found[0] if len(found) == 1 else None


def check(root):
    order, interfaces, owners = read_layering(root)
    rank = {m: i for i, m in enumerate(order)}
    dirs = module_dirs(root, order)
    files = []  # (module, path relative to root)
    for mod, d in dirs.items():
        for base, _, names in os.walk(os.path.join(root, d)):
            for n in sorted(names):
                if n.endswith((".h", ".cc", ".cu", ".cuh", ".def")):
                    files.append((mod, os.path.relpath(os.path.join(base, n), root)))
    inc_root = os.path.join(root, "include", "strata")
    for base, _, names in os.walk(inc_root):
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(base, n), inc_root)
            mod = public_owner(root, rel, dirs, owners, order)
            path = os.path.relpath(os.path.join(base, n), root)
            if mod is None:
                files.append((None, path))
            else:
                files.append((mod, path))
    problems = []
    for mod, path in sorted(files, key=lambda f: f[1]):
        if mod is None:
            problems.append(f"{path}:1: no module owns this header: add a source of its name to "
                            "one src/<module>/ or an `owner:` line to the layering block")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                first, _, rest = inc.partition("/")
                if first == "strata" and rest:
                    target = public_owner(root, rest, dirs, owners, order)
                    if target is None:
                        problems.append(f"{path}:{n}: {inc}: no module owns this header")
                        continue
                    private = False
                elif first in dirs and rest and first not in EXTRA_MODULE_DIRS:
                    target, private = first, True
                else:
                    continue  # a file beside the includer, a generated or a test header
                if private and target != mod and not any(
                        fnmatch.fnmatch(inc, p) for p in interfaces):
                    problems.append(f"{path}:{n}: includes {inc}, a private header of module "
                                    f"{target}; use its public or interface headers")
                elif rank[target] > rank[mod]:
                    problems.append(f"{path}:{n}: module {mod} includes {inc} of module "
                                    f"{target}, which comes after it in the module order "
                                    "(docs/architecture.md, \"Module order\")")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    try:
        problems = check(os.path.abspath(args.root))
    except LayeringError as e:
        print(f"check_layering: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} violation(s) of the module order", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
