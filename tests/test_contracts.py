"""Every public table keeps its declared dtypes (traceparse.tables.contracts).

Checked on every fixture that loads (one Profile per run and host, and each
multi-host run as one Profile) and on a capture with no memory events at all.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES

import traceparse
from traceparse import Profile
from traceparse._proto import xplane_pb2
from traceparse.tables import contracts

# Fixtures that load (the broken ones are tested for their errors elsewhere).
LOADABLE = [
    "keras_train",
    "eager_ops",
    "leak",
    "no_memory",
    "keras_callback",
    "two_runs",
    "both",
    "legacy",
    "legacy_binary",
    "keras_inventory",
    "keras_memory_callback",
    "layers_cnn",
    "layers_functional",
    "layers_sequential",
    "xla_function",
    "xla_keras",
    "batch_128",
    "batch_256",
]


def public_tables(prof: Profile) -> Iterator[tuple[str, pd.DataFrame]]:
    """Every table the Profile hands out, by its contract's name."""
    yield "allocations", prof.allocations
    yield "frees_without_allocation", prof.frees_without_allocation
    yield "timeline", prof.timeline
    yield "step_markers", prof.step_markers
    yield "peak", prof.peak
    yield "peak_instants", prof.peak_instants
    yield "live_at_peak", prof.live_at_peak()
    yield "attribution", prof.attribution
    yield "breakdown", prof.breakdown
    yield "ops", prof.ops
    yield "scopes", prof.scopes()
    yield "scopes", prof.scopes(2)
    yield "steps", prof.steps
    leaks = prof.leaks()
    yield "leaks.by_op", leaks.by_op
    yield "leaks.growth", leaks.growth
    yield "leaks.allocators", leaks.allocators
    yield "layers", prof.layers()
    yield "layers_by_replica", prof.layers(by_replica=True)
    yield "layer_paths", prof.layers(depth=2)
    yield "layer_paths_by_replica", prof.layers(by_replica=True, depth=3)
    yield "variables", prof.variables
    yield "xla_programs", prof.xla_programs
    yield "xla_buffers", prof.xla_buffers
    yield "xla_parameters", prof.xla_parameters
    yield "lines", prof.lines()
    yield "lines", prof.lines(by_stack=True)
    yield "stacks", prof.stacks


def profiles(name: str) -> list[Profile]:
    path = FIXTURES / name
    return [*traceparse.load_all(path), traceparse.load(path)]


def test_every_declared_table_is_checked() -> None:
    """A table declared but never handed out (or the reverse) would escape the check."""
    (prof,) = traceparse.load_all(FIXTURES / "keras_train")
    assert {name for name, _ in public_tables(prof)} == set(contracts.TABLES)


@pytest.mark.parametrize("name", LOADABLE)
def test_every_public_table_keeps_its_contract(name: str) -> None:
    for prof in profiles(name):
        for table, frame in public_tables(prof):
            found = contracts.violations(frame, contracts.TABLES[table])
            assert not found, f"{name} ({prof.run}, {prof.hosts}): " + "; ".join(found)


def test_the_tables_of_an_empty_capture_keep_their_contracts(tmp_path: Path) -> None:
    """An XSpace with one empty host plane: every table is empty, with its columns and dtypes."""
    path = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    path.parent.mkdir(parents=True)
    space = xplane_pb2.XSpace(planes=[xplane_pb2.XPlane(id=1, name="/host:CPU")])
    path.write_bytes(space.SerializeToString())
    prof = traceparse.load(path)
    for table, frame in public_tables(prof):
        assert frame.empty, table
        found = contracts.violations(frame, contracts.TABLES[table])
        assert not found, "; ".join(found)


def test_host_and_allocator_share_their_categories_across_tables_and_hosts(tmp_path: Path) -> None:
    """One set of categories per Profile: tables merge on host and allocator without casts."""
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for host, fixture in (("a", "keras_train"), ("b", "leak")):
        (source,) = (FIXTURES / fixture).rglob("*.xplane.pb")
        shutil.copy(source, run / f"{host}.xplane.pb")
    prof = traceparse.load(run)
    assert prof.hosts == ["a", "b"]
    for table, frame in public_tables(prof):
        found = contracts.violations(frame, contracts.TABLES[table])
        assert not found, "; ".join(found)
    hosts = prof.allocations["host"].dtype
    allocators = prof.allocations["allocator"].dtype
    for table, frame in public_tables(prof):
        assert frame["host"].dtype == hosts, table
        if "allocator" in frame.columns:
            assert frame["allocator"].dtype == allocators, table
    merged = prof.allocations.merge(prof.peak[["host", "allocator", "event"]])
    assert merged["host"].dtype == hosts and len(merged) == len(prof.allocations)


def test_one_dtype_per_column_name() -> None:
    """The same column name has the same dtype in every declared table."""
    seen: dict[str, tuple[str, str]] = {}
    for table in contracts.TABLES.values():
        for column, dtype in table.dtypes.items():
            first = seen.setdefault(column, (table.name, dtype))
            assert first[1] == dtype, (column, first, (table.name, dtype))
    assert seen["requested_bytes"][1] == "Int64" and seen["in_use_bytes"][1] == "Int64"


def test_conform_unions_categories_and_a_violation_is_reported() -> None:
    a = pd.DataFrame({"host": pd.Categorical(["a"]), "x": [1]})
    b = pd.DataFrame({"host": pd.Categorical(["b"]), "x": [2]})
    both = contracts.concat([a, b])
    assert isinstance(both["host"].dtype, pd.CategoricalDtype)
    assert list(both["host"].cat.categories) == ["a", "b"]
    markers = contracts.STEP_MARKERS
    bad = markers.empty().assign(step=pd.Series(dtype="int64"))
    assert contracts.violations(bad, markers) == ["step_markers.step: int64, declared Int64"]
    assert contracts.violations(contracts.conform(bad, markers), markers) == []


# Old spellings kept for a release with a DeprecationWarning (CHANGELOG.md).
DEPRECATED = {"layers_by_replica"}


def test_one_way_to_reach_each_result() -> None:
    """The rule in Profile's docstring: tables without parameters are properties; every
    method's parameters have defaults, so ``prof.scopes()`` works like a property."""
    # inspect.unwrap: a method old code read as a property (core/compat.called_or_read)
    # is still a method.
    members = {
        name: inspect.unwrap(inspect.getattr_static(Profile, name))
        for name in dir(Profile)
        if not name.startswith("_") and name not in DEPRECATED
    }
    methods = {name for name, member in members.items() if inspect.isfunction(member)}
    assert {"scopes", "layers", "live_at_peak", "leaks", "xla_at_peak", "summary"} <= methods
    for name in methods:
        for parameter in list(inspect.signature(members[name]).parameters.values())[1:]:
            assert parameter.default is not inspect.Parameter.empty, (name, parameter.name)
    (prof,) = traceparse.load_all(FIXTURES / "keras_train")
    for name in sorted(members.keys() - methods):
        value = getattr(prof, name)
        if isinstance(value, pd.DataFrame):
            assert name in contracts.TABLES, f"Profile.{name} is a table with no contract"
    # Results that are not one table: a report, two tables, records, the predictor.
    for name in methods - {
        "predictor",
        "leaks",
        "xla_at_peak",
        "at_instant",
        "summary",
        "failures",
        "diagnostics",
    }:
        assert isinstance(getattr(prof, name)(), pd.DataFrame), name
    # Properties hand out tables (or plain facts): none of them is a tuple of tables.
    for name in sorted(members.keys() - methods):
        assert not isinstance(getattr(prof, name), tuple), name
    # What is documented as cached is cached.
    assert prof.step_markers is prof.step_markers
    assert prof.summary() == prof.summary() and prof.summary() is not prof.summary()
    assert prof.layers() is prof.layers() and prof.xla_at_peak() is prof.xla_at_peak()
