"""Tests of tools/group_headers.py on a small source tree in a temporary directory."""
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(__file__), "..")

LAYERING = """# Architecture
```layering
order: util < ir < frontend
interface: util/*.h
owner: status.h util
```
"""

TREE = {
    "docs/architecture.md": LAYERING,
    "docs/page.md": 'See include/strata/graph.h and include/strata/graph_io.h:\n'
                    '#include "strata/graph.h"\n',
    "include/strata/status.h": "",
    "include/strata/graph.h": '#include "strata/status.h"\n',
    "include/strata/graph_io.h": '#include "strata/graph.h"\n',
    "include/strata/parser.h": '#include <strata/graph.h>\n',
    "src/ir/graph.cc": '#include "strata/graph.h"\n// include/strata/graph.h\n',
    "src/ir/graph_io.cc": '#include "strata/graph_io.h"\n',
    "src/frontend/parser.cc": '#include "strata/parser.h"\n#if __has_include("strata/graph.h")\n'
                              '#endif\nconst char* s = "strata/graph.h is a header";\n',
    "src/frontend/lexer.h": '#include "strata/status.h"\n',
    "CMakeLists.txt": "file(GLOB H include/strata/*.h include/strata/*.def)\n",
}


def make_tree(files):
    root = tempfile.mkdtemp()
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    return root


def run(script, root, *extra):
    return subprocess.run([sys.executable, os.path.join(TOOLS, script), "--root", root, *extra],
                          capture_output=True, text=True)


def read(root, path):
    with open(os.path.join(root, path)) as f:
        return f.read()


class GroupHeadersTest(unittest.TestCase):
    def test_moves_headers_and_rewrites_references(self):
        root = make_tree(TREE)
        r = run("group_headers.py", root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(root, "include/strata"))),
                         ["frontend", "ir", "util"])
        self.assertTrue(os.path.isfile(os.path.join(root, "include/strata/ir/graph_io.h")))
        self.assertTrue(os.path.isfile(os.path.join(root, "include/strata/util/status.h")))
        self.assertEqual(read(root, "include/strata/frontend/parser.h"),
                         "#include <strata/ir/graph.h>\n")
        self.assertEqual(read(root, "src/ir/graph.cc"),
                         '#include "strata/ir/graph.h"\n// include/strata/ir/graph.h\n')
        parser = read(root, "src/frontend/parser.cc")
        self.assertIn('#include "strata/frontend/parser.h"', parser)
        self.assertIn('__has_include("strata/ir/graph.h")', parser)
        self.assertIn('"strata/graph.h is a header"', parser)  # not a header name: unchanged
        self.assertEqual(read(root, "src/frontend/lexer.h"), '#include "strata/util/status.h"\n')
        self.assertEqual(read(root, "docs/page.md"),
                         "See include/strata/ir/graph.h and include/strata/ir/graph_io.h:\n"
                         '#include "strata/ir/graph.h"\n')
        self.assertEqual(read(root, "CMakeLists.txt"),
                         "file(GLOB H include/strata/*/*.h include/strata/*/*.def)\n")
        # The grouped tree keeps the module order, and a second run has nothing to do.
        self.assertEqual(run("check_layering.py", root).returncode, 0)
        again = run("group_headers.py", root)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("nothing to do", again.stdout)

    def test_header_without_owner_changes_nothing(self):
        files = dict(TREE)
        files["include/strata/orphan.h"] = ""
        root = make_tree(files)
        r = run("group_headers.py", root)
        self.assertEqual(r.returncode, 2)
        self.assertIn("include/strata/orphan.h: no module owns it", r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(root, "include/strata/graph.h")))
        self.assertEqual(read(root, "src/ir/graph.cc"), TREE["src/ir/graph.cc"])


if __name__ == "__main__":
    unittest.main()
