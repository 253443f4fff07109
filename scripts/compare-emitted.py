#!/usr/bin/env python3
"""Compares two folders written by scripts/emit-corpus.sh, ignoring what cannot change meaning.

    scripts/compare-emitted.py BEFORE AFTER [--show N]

Every line of code is parsed with C++ operator precedence into an expression tree, so two lines
that differ only in redundant parentheses, spacing or constant spelling compare equal; comments
are compared separately. The files are then aligned line by line (difflib), and what is left is
classified:
  identical       byte for byte the same
  parens          the same trees (only parentheses / spacing differ), same comments
  folding         the same trees once integer identities and literal arithmetic are folded
                  (x * 1 → x, x + 0 → x, x % 1 → 0, 2 * 3 → 6)
  comments        the same trees, some comment text differs
  reassociation   the same trees once integer sums are flattened into ordered term lists
                  (a + (b + c) == a + b + c; exact for integers; a chain that starts at a
                  pointer name keeps its grouping)
  braces          besides the above, only lines made of `{` / `}` differ (a plain block opened or
                  removed around the same statements)
  layout          besides the above, the same statements spread over other lines (a one-line
                  `{ a; b; }` block written over several lines, a statement broken in two), read
                  as the same trees once the differing lines are joined
  other           anything else: printed (the first N hunks) for a human to judge
Exit status 0 when no file is `other` and the two folders hold the same files.
"""
import difflib
import os
import re
import sys

TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<num>0x[0-9a-fA-F]+|\d+\.\d*(?:e[-+]?\d+)?f?|\d+(?:e[-+]?\d+)f?|\d+[uUlL]*)
    | (?P<id>[A-Za-z_][\w]*(?:::[A-Za-z_~][\w]*)*)
    | (?P<op><<=|>>=|\.\.\.|->|::|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|\+\+|--|[-+*/%<>=!&|^~?:;,.(){}\[\]\#])
    )""",
    re.VERBOSE,
)

BINARY = {
    "*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11,
    "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9, "&": 8, "^": 7, "|": 6,
    "&&": 5, "||": 4,
}
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


def tokenize(text):
    toks, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ValueError("cannot tokenize: " + text[pos:pos + 20])
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind)
        # A template-id: a name followed directly by `<` takes the balanced <…> along.
        if kind == "id" and pos < len(text) and text[pos] == "<":
            depth, end = 0, pos
            while end < len(text):
                c = text[end]
                depth += c == "<"
                depth -= c == ">"
                end += 1
                if depth == 0:
                    break
            tok += re.sub(r"\s+", "", text[pos:end])
            pos = end
            # A name after the template (`Foo<T>::bar`).
            while text.startswith("::", pos):
                m2 = re.match(r"::[A-Za-z_]\w*", text[pos:])
                tok += m2.group(0)
                pos += m2.end()
        toks.append(tok)
    return toks


class Parser:
    def __init__(self, toks):
        self.t, self.i = toks, 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def items(self, stop=()):
        """Expressions and separators up to a token in `stop` (not consumed)."""
        out = []
        while self.peek() is not None and self.peek() not in stop:
            tok = self.peek()
            if tok in (";", ",", "{", "}", ":", "#", "?", ")", "]"):
                out.append(self.take())
                continue
            out.append(self.expr(0))
        return out

    def expr(self, minp):
        lhs = self.prefix()
        while True:
            op = self.peek()
            if op in ASSIGN and minp <= 1:
                self.take()
                lhs = ("=", op, lhs, self.expr(1))
                continue
            if op == "?" and minp <= 2:
                self.take()
                a = self.expr(0)
                if self.peek() != ":":
                    raise ValueError("?: without :")
                self.take()
                b = self.expr(2)
                lhs = ("?:", lhs, a, b)
                continue
            p = BINARY.get(op)
            if p is None or p < minp:
                return lhs
            self.take()
            lhs = ("bin", op, lhs, self.expr(p + 1))

    def prefix(self):
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end")
        if tok in ("-", "!", "&", "*", "~", "++", "--"):
            self.take()
            return self.postfix(("pre", tok, self.expr(14)))
        if tok == "(":
            self.take()
            # (void)x, (float)x: a C cast.
            if self.peek() in ("void", "float", "int") and self.i + 1 < len(self.t) and \
                    self.t[self.i + 1] == ")":
                ty = self.take()
                self.take()
                return ("cast", ty, self.expr(14))
            inner = self.items(stop=(")",))
            if self.peek() != ")":
                raise ValueError("unbalanced (")
            self.take()
            node = inner[0] if len(inner) == 1 else ("group", tuple(inner))
            return self.postfix(node)
        if tok == "[":  # a lambda capture
            self.take()
            inner = self.items(stop=("]",))
            self.take()
            return self.postfix(("capture", tuple(inner)))
        return self.postfix(self.take())

    def postfix(self, node):
        while True:
            tok = self.peek()
            if tok == "(":
                self.take()
                args = self.items(stop=(")",))
                if self.peek() != ")":
                    raise ValueError("unbalanced call")
                self.take()
                node = ("call", node, tuple(args))
            elif tok == "[":
                self.take()
                idx = self.items(stop=("]",))
                self.take()
                node = ("index", node, tuple(idx))
            elif tok in ("++", "--", ".", "->"):
                self.take()
                node = ("post", tok, node) if tok in ("++", "--") else (tok, node, self.take())
            else:
                return node


NUM = re.compile(r"^(\d+)(?:ULL|LL|U|L)?$")


def as_int(x):
    return int(x) if isinstance(x, str) and re.fullmatch(r"\d+", x) else None


def simplify(node):
    """Integer identities and literal arithmetic folded (x*1, x+0, x%1, 2*3, …), bottom up."""
    if isinstance(node, str) or node is None or len(node) == 0:
        return node
    if node[0] == "bin":
        op, a, b = node[1], simplify(node[2]), simplify(node[3])
        x, y = as_int(a), as_int(b)
        if x is not None and y is not None and op in "+-*/%" and (op not in "/%" or y != 0):
            v = {"+": x + y, "-": x - y, "*": x * y, "/": x // y if y else 0, "%": x % y if y else 0}[op]
            if v >= 0:
                return str(v)
        if op == "*" and (x == 1 or y == 1):
            return b if x == 1 else a
        if op == "*" and (x == 0 or y == 0):
            return "0"
        if op in "+-" and y == 0:
            return a
        if op == "+" and x == 0:
            return b
        if op == "/" and y == 1:
            return a
        if op == "%" and y == 1:
            return "0"
        return ("bin", op, a, b)
    return tuple(simplify(x) if isinstance(x, (tuple, str)) else x for x in node)


def split_comment(line):
    """(code, comment) of one line: the comment is a line comment outside string literals."""
    in_str = False
    for k in range(len(line) - 1):
        c = line[k]
        if c == '"' and (k == 0 or line[k - 1] != "\\"):
            in_str = not in_str
        if not in_str and line[k:k + 2] == "//":
            return line[:k], line[k + 2:].strip()
    return line, ""


def canon(line):
    """(code tree, comment) of one line; the tree is None for a line that does not parse."""
    code, comment = split_comment(line)
    code = code.strip()
    # `f(args, [&](params) {` opens a callback whose body follows: close the call here.
    code = re.sub(r"\[&\]\((.*)\) \{$", r"__lambda(\1))", code)
    if code.startswith("#"):
        return ("pp", re.sub(r"\s+", " ", code)), comment
    try:
        return ("code", tuple(Parser(tokenize(code)).items())), comment
    except (ValueError, IndexError):
        return ("text", re.sub(r"\s+", " ", code)), comment


POINTER = re.compile(r"^(gin\d+|gout\d+|src|dst|s\d+_\w*|smem|red|ws|in\d+|out|p)$")


def terms(node, sign, out):
    if isinstance(node, tuple) and len(node) == 2 and node[0] == "sum":
        out.extend((sign * s, t) for s, t in node[1])
    elif isinstance(node, tuple) and len(node) == 4 and node[0] == "bin" and node[1] in "+-":
        terms(node[2], sign, out)
        terms(node[3], sign if node[1] == "+" else -sign, out)
    else:
        out.append((sign, node))


def reassociate(node):
    """Integer sums and differences as flat, ordered term lists (a + (b + c) == a + b + c),
    except chains that start at a pointer (pointer arithmetic keeps its grouping)."""
    if isinstance(node, str) or node is None or len(node) == 0:
        return node
    node = tuple(reassociate(x) if isinstance(x, (tuple, str)) else x for x in node)
    if node[0] == "bin" and node[1] in "+-":
        ts = []
        terms(node, 1, ts)
        first = ts[0][1]
        if isinstance(first, str) and POINTER.match(first):
            return node
        return ("sum", tuple(ts))
    return node


def classify(a_lines, b_lines):
    ca = [canon(x) for x in a_lines]
    cb = [canon(x) for x in b_lines]
    ta = [c for c, _ in ca]
    tb = [c for c, _ in cb]
    if ta != tb and [simplify(c) for c in ta] == [simplify(c) for c in tb]:
        kinds = {"folding"}
        if any(x[1] != y[1] for x, y in zip(ca, cb)):
            kinds.add("comments")
        return kinds, []
    if ta != tb and [reassociate(simplify(c)) for c in ta] == [reassociate(simplify(c)) for c in tb]:
        kinds = {"reassociation"}
        if any(x[1] != y[1] for x, y in zip(ca, cb)):
            kinds.add("comments")
        return kinds, []
    if ta != tb:
        sa = [reassociate(simplify(c)) for c in ta]
        sb = [reassociate(simplify(c)) for c in tb]
        kinds, hunks = classify_trees(a_lines, b_lines, ca, cb, sa, sb)
        return kinds, hunks
    return classify_trees(a_lines, b_lines, ca, cb, ta, tb)


def joined(lines):
    """The canonical tree of `lines` read as one line (their code parts joined)."""
    code = " ".join(split_comment(x)[0].strip() for x in lines)
    return reassociate(simplify(canon(code)[0]))


def classify_trees(a_lines, b_lines, ca, cb, ta, tb):
    sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    kinds, hunks = set(), []
    brace = {("code", ("{",)), ("code", ("}",)), ("code", ())}
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            if any(ca[i1 + k][1] != cb[j1 + k][1] for k in range(i2 - i1)):
                kinds.add("comments")
            continue
        if all(x in brace for x in ta[i1:i2] + tb[j1:j2]):
            kinds.add("braces")
            continue
        if joined(a_lines[i1:i2]) == joined(b_lines[j1:j2]):
            kinds.add("layout")
            if [c for _, c in ca[i1:i2] if c] != [c for _, c in cb[j1:j2] if c]:
                kinds.add("comments")
            continue
        kinds.add("other")
        hunks.append((a_lines[i1:i2], b_lines[j1:j2]))
    return kinds, hunks


def main():
    args = sys.argv[1:]
    show = 5
    if "--show" in args:
        k = args.index("--show")
        show = int(args[k + 1])
        del args[k:k + 2]
    before, after = args
    files = set()
    for root in (before, after):
        for d, _, fs in os.walk(root):
            for f in fs:
                files.add(os.path.relpath(os.path.join(d, f), root))
    counts, shown, missing = {}, 0, []
    for rel in sorted(files):
        pa, pb = os.path.join(before, rel), os.path.join(after, rel)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            missing.append(rel)
            continue
        a, b = open(pa).read(), open(pb).read()
        if a == b:
            counts["identical"] = counts.get("identical", 0) + 1
            continue
        kinds, hunks = classify(a.splitlines(), b.splitlines())
        kind = ("other" if "other" in kinds else "layout" if "layout" in kinds else
                "braces" if "braces" in kinds else
                "reassociation" if "reassociation" in kinds else
                "folding" if "folding" in kinds else
                "comments" if "comments" in kinds else "parens")
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "other" and shown < show:
            shown += 1
            print("=== " + rel)
            for ha, hb in hunks[:3]:
                for x in ha:
                    print("- " + x)
                for x in hb:
                    print("+ " + x)
    print("files: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if missing:
        print(f"only in one folder: {len(missing)} (e.g. {missing[0]})")
    return 0 if counts.get("other", 0) == 0 and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
