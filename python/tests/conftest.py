"""Shared setup of the Python tests (docs/python.md, "Tests").

The tests import the installed package (`pip install .`; scripts/python-test.sh does it), so
what they check is what users get. Search results go to a per-session cache directory.
"""
import os
import pathlib
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("STRATA_CACHE_DIR", tempfile.mkdtemp(prefix="strata-pytest-cache-"))


@pytest.fixture
def examples():
    return ROOT / "examples" / "programs"


@pytest.fixture
def root():
    return ROOT
