"""Old spellings of ``Profile``'s public names, kept a release with a DeprecationWarning.

``Profile.layers``, ``Profile.leaks``, ``Profile.diagnostics`` and
``Profile.failures`` were read as properties; they are methods now
(``prof.layers(by_replica=True)``, ``prof.diagnostics()``). ``called_or_read`` keeps both
working: calling is the new spelling, silent; using the method as if it
were its result (``prof.layers["layer"]``, ``prof.leaks.verdict``) warns and
answers with the result of the call. CHANGELOG.md lists what moved.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["called_or_read", "moved"]

F = TypeVar("F", bound=Callable[..., Any])


def moved(old: str, new: str, *, depth: int = 1) -> None:
    """Warn that ``old`` is spelled ``new`` now, blaming the code ``depth`` calls above
    the caller (1: the caller's caller)."""
    warnings.warn(
        f"{old} is deprecated: use {new} (the old spelling goes in a later release)",
        DeprecationWarning,
        stacklevel=2 + depth,
    )


class _CalledOrRead:
    """A bound method that, used as its own result, warns and stands for it."""

    __slots__ = ("_method", "_name")

    def __init__(self, method: Callable[[], Any], name: str) -> None:
        self._method = method
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._method(*args, **kwargs)

    def _read(self) -> Any:
        moved(f"Profile.{self._name} as a property", f"Profile.{self._name}()", depth=2)
        return self._method()

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(self._read(), attribute)

    def __getitem__(self, key: Any) -> Any:
        return self._read()[key]

    def __len__(self) -> int:
        return len(self._read())

    def __bool__(self) -> bool:
        return bool(self._read())

    def __contains__(self, item: Any) -> bool:
        return item in self._read()

    def __eq__(self, other: object) -> bool:
        # ``prof.failures == []`` compared the list; a bound method compares itself.
        if isinstance(other, _CalledOrRead):
            return self._method == other._method
        return bool(self._read() == other)

    __hash__ = None  # type: ignore[assignment]  # it stands for a list

    def __iter__(self) -> Iterator[Any]:
        return iter(self._read())

    def __repr__(self) -> str:
        return f"<bound method Profile.{self._name}>"


class _Descriptor:
    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function
        self.__doc__ = function.__doc__
        self.__name__ = function.__name__
        self.__wrapped__ = function

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self._function
        return _CalledOrRead(self._function.__get__(instance, owner), self.__name__)


if TYPE_CHECKING:  # to a type checker it is the method itself

    def called_or_read(function: F) -> F:
        return function

else:

    def called_or_read(function: F) -> F:
        """Make a method that old code read as a property work both ways (see module)."""
        return _Descriptor(function)
