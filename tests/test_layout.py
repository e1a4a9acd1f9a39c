"""The package tree is the pipeline: a stage never imports a stage after it.

Every ``import`` in every module is checked, function-level and
``if TYPE_CHECKING`` imports included: an annotation that names a later
stage is a dependency on it too (report/ describes what it needs as a
Protocol in report/source.py instead). The top-level modules that glue
stages together for a user (capture, pytest_plugin, keras, the package
``__init__`` and ``__main__``) may import anything; of the stages only cli
(which runs scripts under the profiler) imports them. Only batching and cli
read captures from disk (``core.loading``): report, gate and the analyses get
a Profile.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceparse"

# In pipeline order; ``errors`` and the generated ``_proto`` code come before all.
STAGES = [
    "errors",
    "dependencies",
    "_proto",
    "files",
    "decode",
    "tables",
    "analysis",
    "core",
    "output",
    "report",
    "gate",
    "batching",
    "cli",
]
# Capture time (TensorFlow present): the script runner's child and the variable
# inventory belong with capture.
EXEMPT = {
    "capture",
    "integrations",
    "__init__",
    "__main__",
}
# Reading a capture from disk is the job of the stages that take paths from a user.
LOADERS = {"batching", "cli"}
# The root package's only name a stage may import: the version.
ROOT_NAMES = {"__version__"}


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
    return [item for item in out if item[1] == "traceparse" or item[1].startswith("traceparse.")]


def _violations(name: str, source: str) -> list[str]:
    """What is wrong with the imports of module ``name`` (dotted) whose text is ``source``."""
    stage = _stage_of(name)
    if stage in EXEMPT:
        return []
    assert stage in STAGES, f"{name}: a module outside every stage; add its package to STAGES"
    rank = STAGES.index(stage)
    found = []
    for line, module, names in _imports(source, name):
        where = f"{name}:{line}"
        if module == "traceparse":
            # ``from traceparse import decode`` names a stage; anything else is the lazy API.
            for item in names:
                if item in STAGES:
                    if STAGES.index(item) > rank:
                        found.append(f"{where}: {stage} imports the later stage {item}")
                elif item not in ROOT_NAMES:
                    found.append(f"{where}: {stage} imports traceparse.{item} (the public API)")
            continue
        target = _stage_of(module)
        if target in EXEMPT:
            if stage == "cli":
                continue  # the command runs scripts under the profiler (capture)
            found.append(f"{where}: {stage} imports the top-level module {module}")
        elif target not in STAGES:
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
    assert packages <= set(STAGES) | EXEMPT, packages - set(STAGES) - EXEMPT
    stages = {"errors", "dependencies"}
    assert modules <= EXEMPT | stages, modules - EXEMPT - stages


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_later_stage(path: Path) -> None:
    found = _violations(_name_of(path), path.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_the_walk_finds_imports_wherever_they_are() -> None:
    """Function-level, relative and TYPE_CHECKING imports all count: the check can fail."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from traceparse.decode.trace import MemoryTrace\n"  # an earlier stage: fine
        "from traceparse import __version__, errors\n"  # fine
        "if TYPE_CHECKING:\n    from traceparse.report.view import View\n"
        "def f():\n    from ..output import units\n    import traceparse.cli.app\n"
        "    from traceparse.core.loading import load\n"
        "    from traceparse import load_all\n"
        "    from . import liveness\n"  # the same stage: fine
    )
    found = _violations("traceparse.analysis.peak", source)
    assert [f.split(":")[1] for f in found] == ["5", "7", "8", "9", "9", "10"], found
    assert _violations("traceparse.capture", source) == []
    assert _violations("traceparse.cli.app", "from traceparse.capture import profile") == []
    assert _violations("traceparse.gate.budgets", "from traceparse.core import loading") != []
