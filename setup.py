"""The compiled extensions, and nothing else: the project's metadata is in
pyproject.toml. They are declared here, through setuptools' stable
``ext_modules`` argument, because its pyproject.toml table
(``[[tool.setuptools.ext-modules]]``) is marked experimental and warns on every
build. Both are optional: where no C compiler is at hand the install goes on,
the numpy path decodes alone (traceparse/decode/native.py) and arrays come
from NumPy's default allocator (traceparse/core/memory.py).

Rebuild in place: ``python setup.py build_ext --inplace``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # The decoder's compiled loops (traceparse/decode/native.py).
        Extension("traceparse.decode._native", ["traceparse/decode/_native.c"], optional=True),
        # The pool NumPy's arrays come from while traceparse works.
        Extension("traceparse.core._pool", ["traceparse/core/_pool.c"], optional=True),
    ]
)
