"""Analyses over a ``Profile``'s tables: peak, attribution, roll-ups, steps, leaks.

Each module does one job on whole columns; ``Profile`` exposes them as
properties and methods. Nothing here reads a capture or renders a report; the
records built from these numbers are ``traceparse.records``.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

from traceparse.analysis.attribution import PARTS, attribution_table
from traceparse.analysis.layers import layers_table
from traceparse.analysis.leaks import LeakReport, leak_report
from traceparse.analysis.peak import live_at_peak_table, peak_table, select
from traceparse.analysis.rollups import NO_SCOPE, ops_table, scope_of, scopes_table
from traceparse.analysis.steps import steps_table

__all__ = [
    "NO_SCOPE",
    "PARTS",
    "LeakReport",
    "attribution_table",
    "layers_table",
    "leak_report",
    "live_at_peak_table",
    "ops_table",
    "peak_table",
    "scope_of",
    "scopes_table",
    "select",
    "steps_table",
]

# Names that moved to traceparse.records, kept a release with a DeprecationWarning.
_MOVED = {
    "AllocatorRecord": "record",
    "LeakVerdict": "record",
    "Part": "record",
    "StepUnit": "record",
    "AllocatorSummary": "summary",
    "build_records": "summary",
    "build_summaries": "summary",
}


def __getattr__(name: str) -> Any:
    old = _MOVED.get(name)
    if old is None:
        raise AttributeError(f"module 'traceparse.analysis' has no attribute {name!r}")
    warnings.warn(
        f"traceparse.analysis.{name} moved to traceparse.records.{name}; the old name goes "
        "in a later release",
        DeprecationWarning,
        stacklevel=2,
    )
    with warnings.catch_warnings():  # the shim's own warning would blame this line
        warnings.simplefilter("ignore", DeprecationWarning)
        if old == "record":
            from traceparse.analysis import record as shim
        else:
            from traceparse.analysis import summary as shim  # type: ignore[no-redef]
    return getattr(shim, name)


# Modules that moved into the analysis packages (CHANGELOG.md, "What moved"): the
# old dotted name still imports, for a release, as the very module at its new
# home, with a DeprecationWarning that names it. One finder on ``sys.meta_path``
# answers for every old name, so no file stands at an old path.
MOVED_MODULES = {
    "traceparse.analysis.bfc": "traceparse.analysis.predict.bfc",
    "traceparse.analysis.layer_generation": "traceparse.analysis.naming.generations",
    "traceparse.analysis.layer_names": "traceparse.analysis.naming.layers",
    "traceparse.analysis.layer_owners": "traceparse.analysis.naming.owners",
    "traceparse.analysis.layer_stacks": "traceparse.analysis.naming.stacks",
    "traceparse.analysis.optimizers": "traceparse.analysis.naming.optimizers",
    "traceparse.analysis.predict_batch": "traceparse.analysis.predict.batch",
    "traceparse.analysis.predict_bfc": "traceparse.analysis.predict.simulate",
    "traceparse.analysis.predict_capacity": "traceparse.analysis.predict.capacity",
    "traceparse.analysis.predict_fit": "traceparse.analysis.predict.fit",
    "traceparse.analysis.predict_parts": "traceparse.analysis.predict.parts",
    "traceparse.analysis.predict_replay": "traceparse.analysis.predict.replay",
    "traceparse.analysis.predict_workspace": "traceparse.analysis.predict.workspace",
    "traceparse.analysis.predict_xla": "traceparse.analysis.predict.xla",
    "traceparse.analysis.variable_match": "traceparse.analysis.naming.variables",
    "traceparse.analysis.variable_slots": "traceparse.analysis.naming.variable_slots",
}


def _callers_level() -> int:
    """The ``stacklevel`` that blames the line that imported: ``warnings`` skips
    the import system's frozen frames itself; ``importlib.import_module``'s and
    this module's own frames are counted past here."""
    frame, level = sys._getframe(2), 2  # exec_module's caller
    while frame is not None:
        name = frame.f_code.co_filename
        if not ("importlib" in name and "_bootstrap" in name):
            if name not in (__file__, importlib.__file__):
                break
            level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name as its new module (``MOVED_MODULES``)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED_MODULES[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}; the old name goes in a later release",
            DeprecationWarning,
            stacklevel=_callers_level(),
        )
        # The import system hands out what sys.modules holds once this returns: the
        # module at its new home, so old and new names share one module object.
        sys.modules[module.__name__] = importlib.import_module(new)


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
