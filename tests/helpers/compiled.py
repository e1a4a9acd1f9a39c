"""Checks that an optional C extension was built where it could be."""

from __future__ import annotations

import os
import shutil

import pytest


def expect_built(extension: object, source: str, off_by: str) -> None:
    """A silent fallback would hide a build that broke: where pip had a C
    compiler (as on CI), ``extension`` must have been built from ``source``."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the fallback serves alone")
    if os.environ.get(off_by):
        pytest.skip(f"{off_by} asks for the fallback")
    assert extension is not None, f"{source} was not built"
