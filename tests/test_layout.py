"""The package tree is the pipeline: a stage never imports a stage after it.

Every ``import`` in every module is checked, function-level and
``if TYPE_CHECKING`` imports included: an annotation that names a later
stage is a dependency on it too (report/ describes what it needs as a
Protocol in report/source.py instead). Only the package face (``__init__``)
and ``__main__`` may import anything, and no module outside cli imports the
face (stages take the version from ``traceparse.version``). No two modules
import each other, directly or through others. Only the stages that take
paths from a user or write captures (capture, integrations, batching, cli)
read captures from disk (``core.loading``): report, gate and the analyses get
a Profile.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceparse"

# In pipeline order; ``errors``, the versions, bytes in words (``units``), the
# loading of the optional C extensions (``compiled``) and the generated
# ``_proto`` code come before all. ``records`` (one per allocator, built from
# the analyses) comes before ``core``, whose Profile hands them out.
# capture (profiling, TensorFlow present) reads what it wrote with core; the
# integrations (Keras, pytest) use the gate and the reports.
STAGES = [
    "errors",
    "version",
    "units",
    "compiled",
    "_proto",
    "files",
    "decode",
    "tables",
    "analysis",
    "records",
    "core",
    "capture",
    "output",
    "report",
    "gate",
    "integrations",
    "batching",
    "cli",
]
# Old spellings of moved modules, kept a release with a DeprecationWarning
# (CHANGELOG.md): each only re-exports its new home.
SHIMS = {"keras"}
# The same inside a stage: modules that moved to a later stage's package.
SHIM_MODULES = {"traceparse.analysis.record", "traceparse.analysis.summary"}
# The package face and ``python -m traceparse``: they glue the stages together.
EXEMPT = {"__init__", "__main__", *SHIMS}
# The only modules at the top of the package: the rest is in stage packages.
TOP_MODULES = {"__init__", "__main__", "errors", "version", "units", "compiled", *SHIMS}
# Reading a capture from disk is the job of the stages that take paths from a
# user or write the capture themselves.
LOADERS = {"capture", "integrations", "batching", "cli"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_proto" not in p.relative_to(PACKAGE).parts)


def _stage_of(module: str) -> str:
    """The stage of a dotted module name under traceparse (``traceparse.decode.wire``: decode)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _name_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts)


def _imports(source: str, name: str) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every traceparse import in a module, relative ones resolved."""
    tree = ast.parse(source)
    package = name.removesuffix(".__init__") if name.endswith(".__init__") else name
    package = package if name.endswith(".__init__") else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            out.append((node.lineno, module, [alias.name for alias in node.names]))
    # A module named in a string (importlib.import_module("traceparse.x.y")) is an
    # import too: hiding one in a string would hide it from this check.
    out += [
        (node.lineno, node.value, [])
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _MODULE_NAME.fullmatch(node.value)
        and node.value.split(".")[1] in STAGES  # not a format's name ("traceparse.variables")
    ]
    return [item for item in out if item[1] == "traceparse" or item[1].startswith("traceparse.")]


_MODULE_NAME = re.compile(r"traceparse(\.[a-z_][a-z0-9_]*)+")


def _violations(name: str, source: str) -> list[str]:
    """What is wrong with the imports of module ``name`` (dotted) whose text is ``source``."""
    stage = _stage_of(name)
    if stage in EXEMPT or name in SHIM_MODULES:
        return []
    assert stage in STAGES, f"{name}: a module outside every stage; add its package to STAGES"
    rank = STAGES.index(stage)
    found = []
    for line, module, names in _imports(source, name):
        where = f"{name}:{line}"
        if module == "traceparse":
            # ``from traceparse import decode`` names a stage; anything else is the face.
            for item in names:
                if item in STAGES:
                    if STAGES.index(item) > rank:
                        found.append(f"{where}: {stage} imports the later stage {item}")
                elif stage != "cli":
                    found.append(f"{where}: {stage} imports traceparse.{item} (the package face)")
            continue
        target = _stage_of(module)
        if target not in STAGES:
            found.append(f"{where}: {stage} imports {module}, which is in no stage")
        elif STAGES.index(target) > rank:
            found.append(f"{where}: {stage} imports {module}, a later stage ({target})")
        loads = module == "traceparse.core.loading" or (
            module == "traceparse.core" and "loading" in names
        )
        if loads and stage not in LOADERS:
            found.append(f"{where}: {stage} loads captures (only {sorted(LOADERS)} may)")
    return found


def test_every_module_belongs_to_a_stage() -> None:
    top = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    packages = {name for name in top if (PACKAGE / name).is_dir()}
    modules = {name.removesuffix(".py") for name in top if name.endswith(".py")}
    assert packages <= set(STAGES), packages - set(STAGES)
    assert modules <= TOP_MODULES, modules - TOP_MODULES


def _module_names() -> set[str]:
    return {_name_of(p).removesuffix(".__init__") for p in _modules()}


def _graph() -> dict[str, set[str]]:
    """Module -> the traceparse modules it imports (a package means its ``__init__``)."""
    known = _module_names()
    graph: dict[str, set[str]] = {}
    for path in _modules():
        name = _name_of(path)
        edges = set()
        for _line, module, names in _imports(path.read_text(encoding="utf-8"), name):
            # ``from pkg import mod`` imports the module ``pkg.mod``; other names are pkg's.
            subs = {f"{module}.{n}" for n in names if f"{module}.{n}" in known}
            edges |= subs
            if len(subs) < len(names) or not names:
                edges.add(module)
        name = name.removesuffix(".__init__")
        graph[name] = {e for e in edges if e in known and e != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other() -> None:
    """Directly or through others, function-level and TYPE_CHECKING imports included;
    the package face may import anything, and nothing below cli imports it."""
    graph = {k: v for k, v in _graph().items() if k != "traceparse"}
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_later_stage(path: Path) -> None:
    found = _violations(_name_of(path), path.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_the_walk_finds_imports_wherever_they_are() -> None:
    """Function-level, relative and TYPE_CHECKING imports all count: the check can fail."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from traceparse.decode.trace import MemoryTrace\n"  # an earlier stage: fine
        "from traceparse.version import __version__\n"  # fine
        "from traceparse import errors\n"  # fine
        "if TYPE_CHECKING:\n    from traceparse.report.view import View\n"
        "def f():\n    from ..output import units\n    import traceparse.cli.app\n"
        "    from traceparse.core.loading import load\n"
        "    from traceparse import load_all\n"
        "    from . import liveness\n"  # the same stage: fine
    )
    found = _violations("traceparse.analysis.peak", source)
    assert [f.split(":")[1] for f in found] == ["6", "8", "9", "10", "10", "11"], found
    assert _violations("traceparse.cli.app", "from traceparse.capture import profile") == []
    assert _violations("traceparse.cli.app", "from traceparse import __version__") == []
    assert _violations("traceparse.gate.baseline", "from traceparse import __version__") != []
    assert _violations("traceparse.gate.budgets", "from traceparse.core import loading") != []
    # A module named in a string is seen as well.
    hidden = 'import importlib\nR = importlib.import_module("traceparse.report.notebook")\n'
    assert _violations("traceparse.core.display", hidden) != []


# -- renderers read records (issue 46) ------------------------------------------------

# The modules that render what a profile holds: the reports, the outputs, the gate,
# the CLI's views, the batch runner's tasks and summary, the Keras and pytest
# integrations.
RENDERER_PACKAGES = {"report", "output", "gate"}
RENDERER_MODULES = {
    "traceparse.batching.summary",
    "traceparse.batching.tasks",
    "traceparse.integrations.keras",
    "traceparse.integrations.pytest_plugin",
}
# Named imports of core a renderer may make, and why: none but these two, each the
# type of the Profile a public entry point hands back to the user
# (``MemoryCallback.load()``, the ``tf_memory`` fixture's ``.profile``).
RENDERER_EXCEPTIONS = {
    ("traceparse.integrations.keras", "traceparse.core.profile"),
    ("traceparse.integrations.pytest_plugin", "traceparse.core.profile"),
}


def _is_renderer(name: str) -> bool:
    stage = _stage_of(name)
    leaf = name.rsplit(".", 1)[-1]
    return (
        stage in RENDERER_PACKAGES
        or name in RENDERER_MODULES
        or (stage == "cli" and leaf.startswith("_") and "view" in leaf)
    )


def _renderer_violations(name: str, source: str) -> list[str]:
    """What a renderer imports from ``analysis`` or ``core``.

    The rule: a renderer reads ``traceparse.records`` (the record's sections, the
    analyses' names re-exported by ``records.terms``, the ``RecordSource`` Protocol
    for what it reads off a Profile) and the helpers before it (units, errors,
    output, the column declarations), and nothing from ``analysis`` or ``core``, at
    any level, ``if TYPE_CHECKING`` included: a parameter that takes a Profile is
    annotated with ``records.source.RecordSource`` (or ``report.source.ProfileLike``).
    Two allowances, both explicit: a renderer that also loads captures (a loader
    stage, ``LOADERS``) may import ``core.loading``, whose job that is; and
    ``RENDERER_EXCEPTIONS`` lists each (module, core module) pair left, with why."""
    if not _is_renderer(name):
        return []
    stage = _stage_of(name)
    found = []
    for line, module, names in _imports(source, name):
        targets = [module] if module != "traceparse" else [f"traceparse.{n}" for n in names]
        for target in targets:
            if _stage_of(target) not in ("analysis", "core"):
                continue
            if target == "traceparse.core.loading" and stage in LOADERS:
                continue
            if target == "traceparse.core" and names == ["loading"] and stage in LOADERS:
                continue
            if (name, target) in RENDERER_EXCEPTIONS:
                continue
            found.append(f"{name}:{line}: a renderer imports {target} (read the records)")
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if _is_renderer(_name_of(p))],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_renderers_import_no_analysis_or_core(path: Path) -> None:
    found = _renderer_violations(_name_of(path), path.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_every_renderer_exception_is_still_needed() -> None:
    """An exception no module needs any more goes from the list (it stays short)."""
    for name, target in RENDERER_EXCEPTIONS:
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        modules = {m for _line, m, _names in _imports(path.read_text(encoding="utf-8"), name)}
        assert target in modules, (name, target)


def test_the_renderer_check_can_fail() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from traceparse.records import AllocatorRecord\n"  # fine
        "from traceparse.output.units import format_bytes\n"  # fine
        "if TYPE_CHECKING:\n    from traceparse.core.profile import Profile\n"
        "def f():\n    from traceparse.analysis.failure import holders_at\n"
        "    from ..core import loading\n"
        "    from traceparse import analysis\n"
    )
    found = _renderer_violations("traceparse.report.failure", source)
    assert [f.split(":")[1] for f in found] == ["5", "7", "8", "9"], found
    # A loader may load; a module that renders nothing is not checked here.
    assert _renderer_violations("traceparse.batching.tasks", "from ..core import loading") == []
    assert _renderer_violations("traceparse.report.x", "from ..core import loading") != []
    assert _renderer_violations("traceparse.cli.peak", "import traceparse.core.profile") == []
    assert _renderer_violations("traceparse.cli._summary_view", "import traceparse.core") != []
    assert _is_renderer("traceparse.cli._failure_view")


def test_prediction_and_naming_are_packages() -> None:
    """Issue 46: the prediction lives in analysis/predict/, the naming in
    analysis/naming/; no module at an old path stands beside them (the old
    dotted names are aliases, ``traceparse.analysis.MOVED_MODULES``)."""
    analysis = PACKAGE / "analysis"
    for package in ("predict", "naming"):
        assert (analysis / package / "__init__.py").is_file(), package
    loose = sorted(
        p.name
        for p in analysis.glob("*.py")
        if re.match(
            r"(predict|bfc|layer_(names|owners|generation|stacks)|variable_|optimizers)", p.stem
        )
    )
    assert not loose, f"prediction or naming modules outside their package: {loose}"
    from traceparse.analysis import MOVED_MODULES

    for old, new in MOVED_MODULES.items():
        assert not (PACKAGE.parent / (old.replace(".", "/") + ".py")).exists(), old
        assert (PACKAGE.parent / (new.replace(".", "/") + ".py")).is_file(), new


# -- one list of names, written once (issue 46) --------------------------------------------

# A list or tuple of this many names or more, written twice, is a list that will
# drift (a column added to one copy only): the second place reads the first.
NAMES_AT_LEAST = 4


def _name_lists(source: str) -> list[tuple[int, tuple[str, ...]]]:
    """(line, names) of every list or tuple literal of ``NAMES_AT_LEAST`` or more
    strings, ``__all__`` (what a module or package face exports) left out."""
    tree = ast.parse(source)
    exported = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "__all__"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    }
    return [
        (node.lineno, tuple(e.value for e in node.elts))  # type: ignore[attr-defined]
        for node in ast.walk(tree)
        if isinstance(node, ast.List | ast.Tuple)
        and id(node) not in exported
        and len(node.elts) >= NAMES_AT_LEAST
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    ]


def _repeated_lists(sources: dict[str, str]) -> list[str]:
    places: dict[tuple[str, ...], list[str]] = {}
    for name, source in sources.items():
        for line, names in _name_lists(source):
            places.setdefault(names, []).append(f"{name}:{line}")
    return [f"{names} at {', '.join(at)}" for names, at in places.items() if len(at) > 1]


def test_no_list_of_names_is_written_twice() -> None:
    """Column lists, format lists, statuses: each written once, read elsewhere."""
    sources = {_name_of(p): p.read_text(encoding="utf-8") for p in _modules()}
    repeated = _repeated_lists(sources)
    assert not repeated, "\n".join(repeated)


def test_the_repeated_list_check_can_fail() -> None:
    one = 'COLUMNS = ("host", "allocator", "op", "bytes")\n__all__ = ["a", "b", "c", "d"]\n'
    other = 'def f(t):\n    return t[["host", "allocator", "op", "bytes"]]\n'
    faces = '__all__ = ["a", "b", "c", "d"]\nSHORT = ("host", "op", "bytes")\n'
    assert len(_repeated_lists({"m.one": one, "m.other": other})) == 1
    assert _repeated_lists({"m.one": one, "m.faces": faces, "m.short": faces}) == []
