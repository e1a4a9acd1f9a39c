"""Versions: traceparse's own, and those of the packages it runs with, checked
against the tested ranges.

``__version__`` is read by the package face, by the stages that stamp it on
what they write (reports, baselines, batch results) and by setuptools.

The ranges are those of pyproject.toml (tested by ``make compat`` at their low
ends and by the dev environment at their high ends). pip enforces them at
install time; these checks catch an environment changed afterwards (a
``pip install protobuf==3.19`` for another tool) and say so in one line
instead of failing somewhere inside protobuf or pandas.

Only the standard library is imported here: the check must work when the
package it checks is the one that is broken.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from traceparse.errors import DependencyError

__version__ = "0.1.0"

__all__ = [
    "NUMPY",
    "PANDAS",
    "PROTOBUF",
    "REQUIREMENTS",
    "TENSORFLOW",
    "Requirement",
    "__version__",
    "check",
    "check_installed",
]


@dataclass(frozen=True)
class Requirement:
    """A package's supported versions: ``minimum`` and up, less ``excluded``."""

    package: str
    minimum: str
    excluded: tuple[str, ...] = ()
    # What pip would install to fix it; the minimum when empty.
    fix: str = ""

    def spec(self) -> str:
        excluded = "".join(f",!={v}" for v in self.excluded)
        return f"{self.package}>={self.minimum}{excluded}"

    def allows(self, version: str) -> bool:
        found = release(version)
        return found >= release(self.minimum) and not any(
            found == release(v) for v in self.excluded
        )


# The analyser's own dependencies (pyproject.toml's `dependencies`).
PROTOBUF = Requirement(
    "protobuf",
    "3.20.3",
    # TensorFlow 2.16-2.19 refuse these early upb releases too.
    tuple(f"4.21.{n}" for n in range(6)),
)
NUMPY = Requirement("numpy", "1.26.0")
PANDAS = Requirement("pandas", "2.1.0")
REQUIREMENTS = (PROTOBUF, NUMPY, PANDAS)
# Capturing (the `tensorflow` extra); analysing never needs it.
TENSORFLOW = Requirement("tensorflow", "2.16.2", fix="pip install 'traceparse[tensorflow]'")

# Import names that differ from the distribution's.
_MODULES = {"protobuf": "google.protobuf"}
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def release(version: str) -> tuple[int, ...]:
    """'2.1.0rc1' -> (2, 1, 0): the release numbers, trailing zeros dropped."""
    match = _RELEASE.match(version.strip())
    parts = [int(p) for p in match.group(0).split(".")] if match else [0]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _module_version(package: str) -> str | None:
    """The version of an imported module, without a metadata search."""
    module = sys.modules.get(_MODULES.get(package, package))
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else None


def installed_version(package: str) -> str | None:
    """The installed version of ``package``, None when it is not installed."""
    found = _module_version(package)
    if found is not None:
        return found
    import importlib.metadata  # 20-35 ms to import: only for a package without __version__

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        pass
    # Importable without install metadata (a source tree on PYTHONPATH).
    name = _MODULES.get(package, package)
    try:
        if importlib.util.find_spec(name) is None:
            return None
        module = importlib.import_module(name)
    except ImportError:
        return None
    version = getattr(module, "__version__", None)
    return version if isinstance(version, str) else None


def check(requirement: Requirement, found: str | None, purpose: str = "traceparse") -> None:
    """Raise ``DependencyError`` unless ``found`` (None: not installed) is supported."""
    if found is not None and requirement.allows(found):
        return
    spec = requirement.spec()
    fix = requirement.fix or f"pip install '{requirement.package}>={requirement.minimum}'"
    have = "is not installed" if found is None else f"{found} is installed"
    raise DependencyError(
        f"{requirement.package} {have}, but {purpose} needs {spec}: {fix}",
        package=requirement.package,
        found=found,
        needed=spec,
    )


def check_installed(requirements: tuple[Requirement, ...] = REQUIREMENTS) -> None:
    """Check each requirement against what is installed (the first problem raises)."""
    for requirement in requirements:
        check(requirement, installed_version(requirement.package))
