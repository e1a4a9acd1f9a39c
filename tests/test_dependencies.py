"""Unsupported dependencies are usage errors (exit 2) that name the package, the
version found and the version needed; the supported protobuf runtimes build
our message classes.

Old versions are simulated by setting the imported module's ``__version__``
(what traceparse reads first); the real old runtimes run in ``make compat``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, fixture_file

from traceparse.capture import TENSORFLOW_MISSING, profile
from traceparse.cli import main
from traceparse.errors import EXIT_USAGE, CaptureError, DependencyError
from traceparse.version import NUMPY, PANDAS, PROTOBUF, TENSORFLOW, check, release

CAPTURE = fixture_file("keras_train")


@pytest.mark.parametrize(
    ("version", "allowed"),
    [
        ("3.19.6", False),
        ("3.20.3", True),
        ("4.21.0", False),
        ("4.21.5", False),
        ("4.21.6", True),
        ("4.25.8", True),
        ("5.29.5", True),
        ("7.36.2", True),
    ],
)
def test_protobuf_range_is_tensorflows(version: str, allowed: bool) -> None:
    assert PROTOBUF.allows(version) is allowed


def test_release_numbers() -> None:
    assert release("2.1.0") == release("2.1") == (2, 1)
    assert release("2.0.0rc1") == (2,)
    assert release("1.26.4") > release("1.26.0")
    assert release("2.16.2") < release("2.16.10")
    assert NUMPY.allows("2.4.6") and not NUMPY.allows("1.25.2")
    assert PANDAS.allows("3.0.0") and not PANDAS.allows("2.0.3")


def test_the_running_versions_are_supported() -> None:
    import google.protobuf

    for requirement, version in [
        (PROTOBUF, google.protobuf.__version__),
        (NUMPY, np.__version__),
        (PANDAS, pd.__version__),
    ]:
        check(requirement, version)


def test_message_names_package_found_and_needed() -> None:
    with pytest.raises(DependencyError) as info:
        check(PANDAS, "2.0.3")
    error = info.value
    assert (error.package, error.found, error.needed) == ("pandas", "2.0.3", "pandas>=2.1.0")
    assert str(error) == (
        "pandas 2.0.3 is installed, but traceparse needs pandas>=2.1.0: pip install 'pandas>=2.1.0'"
    )
    assert error.exit_code == EXIT_USAGE
    with pytest.raises(DependencyError, match=r"^numpy is not installed, but"):
        check(NUMPY, None)


@pytest.mark.parametrize(("module", "old"), [(np, "1.25.2"), (pd, "2.0.3")])
def test_cli_refuses_an_old_numpy_or_pandas(
    module: types.ModuleType,
    old: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(module, "__version__", old)
    assert main(["summary", str(CAPTURE)]) == EXIT_USAGE
    err = capsys.readouterr().err
    name = module.__name__
    assert err.count("\n") == 1, err
    assert f"{name} {old} is installed" in err
    assert f"needs {name}>=" in err
    assert "internal error" not in err


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_refuses_an_old_protobuf() -> None:
    done = _run(
        f"""
        import google.protobuf
        google.protobuf.__version__ = "3.19.6"
        from traceparse.cli import main
        raise SystemExit(main(["summary", {str(CAPTURE)!r}]))
        """
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr == (
        "traceparse: error: protobuf 3.19.6 is installed, but traceparse needs "
        f"{PROTOBUF.spec()}: pip install 'protobuf>=3.20.3'\n"
    )


def test_loading_with_an_old_protobuf_raises_dependency_error() -> None:
    # The library path: the message classes refuse the runtime when imported.
    done = _run(
        f"""
        import google.protobuf
        google.protobuf.__version__ = "4.21.3"
        import traceparse
        try:
            traceparse.load({str(CAPTURE)!r})
        except traceparse.DependencyError as exc:
            print(exc.package, exc.found)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "protobuf 4.21.3\n"


def test_missing_tensorflow_names_the_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # import tensorflow -> ImportError
    assert "tensorflow is not installed" in TENSORFLOW_MISSING
    assert TENSORFLOW.spec() in TENSORFLOW_MISSING
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    code = main(["run", "--logdir", str(tmp_path / "logs"), str(script)])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err == f"traceparse: error: {TENSORFLOW_MISSING}\n"


def test_too_old_tensorflow_is_a_capture_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = types.ModuleType("tensorflow")
    old.__version__ = "2.15.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tensorflow", old)
    with pytest.raises(CaptureError) as info:
        profile(tmp_path).start()
    assert str(info.value) == (
        "tensorflow 2.15.1 is installed, but capturing needs tensorflow>=2.16.2: "
        "pip install 'traceparse[tensorflow]'"
    )
    assert info.value.exit_code == EXIT_USAGE


def test_message_classes_are_the_runtimes_own() -> None:
    # Built from descriptors, our classes take the runtime's parser (upb where it
    # has one), exactly as protobuf's own generated classes do.
    from google.protobuf import descriptor_pb2

    from traceparse._proto import memory_profile_pb2, xplane_pb2, xplane_skim_pb2

    native = type(descriptor_pb2.FileDescriptorProto)
    for cls in (xplane_pb2.XSpace, xplane_skim_pb2.SkimSpace, memory_profile_pb2.MemoryProfile):
        assert type(cls) is native
        assert cls.__module__.startswith("traceparse._proto.")
    assert xplane_pb2.XPlane.EventMetadataEntry.__qualname__ == "XPlane.EventMetadataEntry"
    assert memory_profile_pb2.MemoryActivity.Name(memory_profile_pb2.ALLOCATION) == "ALLOCATION"
