"""The path one CLI command takes through traceparse's modules (issue 46's design check).

Runs ``traceparse <command> ...`` in this process under ``sys.setprofile`` and
follows which traceparse module is executing, call by call. It prints:

- how many modules it entered and how many distinct module-to-module call edges it took;
- the calls that return to a module already left: a call into a module that is
  still on the stack below the caller, with another module between (``core.profile``
  calls ``analysis.x``, which calls back into ``core.profile``): a callback, a
  module the path leaves and comes back to (a decorator's wrapper counts too);
- the edges that go against the one-way flow (capture -> files -> decode -> tables
  -> core -> analyses -> records -> renderers -> CLI): an earlier stage calling a
  later one, e.g. ``core`` calling ``analysis`` or a record builder calling
  ``output``. Each is a place where a stage still reaches forward.

Usage (from the checkout to measure)::

    PYTHONPATH=$PWD python benchmarks/call_path.py summary fixtures/layers_cnn

Compare two checkouts by running it in each. Nothing outside ``traceparse`` counts,
and the CLI's own output is discarded.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

# The one-way flow (../shared/DESIGN.md): a stage calls only the stages before it.
# The renderers share a level; the CLI and the package's top level drive the rest.
LEVELS = {
    "_proto": 0,
    "units": 0,
    "version": 0,
    "compiled": 0,
    "errors": 0,
    "files": 1,
    "decode": 2,
    "capture": 2,
    "tables": 3,
    "core": 4,
    "analysis": 5,
    "records": 6,
    "output": 7,
    "report": 7,
    "gate": 7,
    "batching": 8,
    "integrations": 8,
    "cli": 9,
    "traceparse": 9,
}


def stage_of(module: str) -> str:
    """``traceparse.records.build`` -> ``records``; ``traceparse.units`` -> ``units``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _returns(frame: FrameType, callee: str) -> bool:
    """Whether ``callee`` runs further down the stack than the caller's own module:
    the path left it and comes back to it now."""
    below = frame.f_back
    caller = below.f_globals.get("__name__", "") if below is not None else ""
    while below is not None and below.f_globals.get("__name__", "") == caller:
        below = below.f_back
    while below is not None:
        if below.f_globals.get("__name__", "") == callee:
            return True
        below = below.f_back
    return False


def call_edges(
    argv: list[str],
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(calling module, called module) -> calls, for calls between traceparse modules;
    and the same for the calls among them that return to a module already left."""
    from traceparse.cli import main

    edges: dict[tuple[str, str], int] = {}
    returns: dict[tuple[str, str], int] = {}

    def follow(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee != caller and callee.startswith("traceparse") and caller.startswith("traceparse"):
            edges[caller, callee] = edges.get((caller, callee), 0) + 1
            if _returns(frame, callee):
                returns[caller, callee] = returns.get((caller, callee), 0) + 1

    tracer: Callable[..., Any] = follow
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        sys.setprofile(tracer)
        try:
            main(argv)
        except SystemExit:
            pass
        finally:
            sys.setprofile(None)
    return edges, returns


def upward(edges: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    """The edges where a stage calls a later one (against the one-way flow)."""
    level = {name: LEVELS.get(stage_of(name), 9) for pair in edges for name in pair}
    return sorted(pair for pair in edges if level[pair[1]] > level[pair[0]])


def main(argv: list[str]) -> None:
    edges, returns = call_edges(argv)
    modules = sorted({name for pair in edges for name in pair})
    against = upward(edges)
    print(f"command: traceparse {' '.join(argv)}")
    print(f"modules entered: {len(modules)}; module-to-module call edges: {len(edges)}")
    print(f"returns to a module already left: {len(returns)} edges, {sum(returns.values())} calls")
    for caller, callee in sorted(returns):
        print(f"  {caller} -> {callee} ({returns[caller, callee]} calls)")
    print(f"edges against the flow (a stage calling a later stage): {len(against)}")
    for caller, callee in against:
        print(f"  {caller} -> {callee} ({edges[caller, callee]} calls)")


if __name__ == "__main__":
    main(sys.argv[1:])
