"""One exception hierarchy for everything traceparse reports to a user.

Every message names the file it is about and says what to do next. The command
line maps each class to an exit code (``exit_code``), so CI can tell a broken
input from a breached budget.
"""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_BUDGET = 4
EXIT_OUT_OF_MEMORY = 5


class TraceparseError(Exception):
    """Base class: a problem the user can act on, described in one line."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        super().__init__(message)


class InputError(TraceparseError):
    """Something is wrong with an input path or file (exit code 3)."""

    exit_code = EXIT_INPUT


class CaptureNotFoundError(InputError):
    """The path does not exist."""


class NoCaptureError(InputError):
    """The path exists but holds no profiler capture."""


class CorruptCaptureError(InputError):
    """The file is truncated, corrupt, or not a capture at all."""


class CaptureTooLargeError(InputError):
    """The file is beyond what can be decoded safely (size or expansion limits)."""


class UsageError(TraceparseError):
    """An argument or option has a value that cannot be used (exit code 2)."""

    exit_code = EXIT_USAGE


class PredictArgumentError(UsageError, ValueError):
    """A batch size out of range (exit code 2 on the command line; a ValueError to
    the Python API, as a bad argument is there)."""


class DependencyError(UsageError):
    """An installed package is missing or outside the supported versions (exit code 2).

    ``found`` is the installed version (None: not installed), ``needed`` the
    supported range as a pip requirement.
    """

    def __init__(self, message: str, package: str, found: str | None, needed: str) -> None:
        super().__init__(message)
        self.package = package
        self.found = found
        self.needed = needed


class BudgetExceededError(TraceparseError):
    """A memory budget was breached (exit code 4)."""

    exit_code = EXIT_BUDGET


class OutOfMemoryError(TraceparseError):
    """The capture ended in out-of-memory: ``check`` fails it whatever the budgets
    say (exit code 5)."""

    exit_code = EXIT_OUT_OF_MEMORY


class CaptureError(TraceparseError):
    """Capturing a profile failed: TensorFlow missing, or a profiler already running."""

    exit_code = EXIT_USAGE
