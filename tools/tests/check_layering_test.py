"""Tests of tools/check_layering.py on small source trees built in a temporary directory."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "check_layering.py")

LAYERING = """# Architecture
```layering
order: util < ir < frontend < interp < verify
interface: util/*.h
interface: interp/value_domain.h
owner: status.h util
```
"""


class CheckLayeringTest(unittest.TestCase):
    def make_tree(self, files, layering=LAYERING):
        root = tempfile.mkdtemp()
        files = dict(files)
        files.setdefault("docs/architecture.md", layering)
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return root

    def run_check(self, root):
        r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True,
                           text=True)
        return r.returncode, r.stdout + r.stderr

    BASE = {
        "include/strata/status.h": "",
        "include/strata/graph.h": '#include "strata/status.h"\n',
        "src/ir/graph.cc": '#include "strata/graph.h"\n#include "util/mix.h"\n',
        "src/util/mix.h": "",
        "include/strata/parser.h": '#include "strata/graph.h"\n',
        "src/frontend/parser.cc": '#include "strata/parser.h"\n',
        "src/interp/executor.h": '#include "strata/graph.h"\n',
        "src/interp/value_domain.h": '#include "interp/executor.h"\n',
        "src/interp/interp.cc": '#include "interp/executor.h"\n',
    }

    def test_clean_tree_passes(self):
        code, out = self.run_check(self.make_tree(self.BASE))
        self.assertEqual(code, 0, out)

    def test_include_of_a_later_module_fails(self):
        files = dict(self.BASE)
        files["src/ir/graph.cc"] += '#include "strata/parser.h"\n'
        code, out = self.run_check(self.make_tree(files))
        self.assertEqual(code, 1, out)
        self.assertIn("src/ir/graph.cc:3: module ir includes strata/parser.h of module frontend",
                      out)

    def test_public_header_of_a_later_module_fails(self):
        files = dict(self.BASE)
        files["include/strata/graph.h"] += '#include "strata/parser.h"\n'
        code, out = self.run_check(self.make_tree(files))
        self.assertEqual(code, 1, out)
        self.assertIn("include/strata/graph.h:2", out)

    def test_private_header_of_another_module_fails_unless_interface(self):
        files = dict(self.BASE)
        files["src/verify/verifier.cc"] = '#include "interp/value_domain.h"\n'
        self.assertEqual(self.run_check(self.make_tree(files))[0], 0)
        files["src/verify/verifier.cc"] = '#include "interp/executor.h"\n'
        code, out = self.run_check(self.make_tree(files))
        self.assertEqual(code, 1, out)
        self.assertIn("private header of module interp", out)

    def test_grouped_header_layout_is_understood(self):
        files = {k: v.replace("strata/parser.h", "strata/frontend/parser.h")
                 for k, v in self.BASE.items() if k != "include/strata/parser.h"}
        files["include/strata/frontend/parser.h"] = '#include "strata/graph.h"\n'
        self.assertEqual(self.run_check(self.make_tree(files))[0], 0)
        files["src/ir/graph.cc"] += '#include "strata/frontend/parser.h"\n'
        self.assertEqual(self.run_check(self.make_tree(files))[0], 1)

    def test_header_without_owner_fails(self):
        files = dict(self.BASE)
        files["include/strata/orphan.h"] = ""
        code, out = self.run_check(self.make_tree(files))
        self.assertEqual(code, 1, out)
        self.assertIn("include/strata/orphan.h:1: no module owns this header", out)

    def test_missing_layering_block_is_an_error(self):
        code, out = self.run_check(self.make_tree(self.BASE, layering="# Architecture\n"))
        self.assertEqual(code, 2, out)
        self.assertIn("no ```layering block", out)


if __name__ == "__main__":
    unittest.main()
