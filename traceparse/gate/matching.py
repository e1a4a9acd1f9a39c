"""Which op of one capture is which op of another, for ``diff``.

TensorFlow numbers ops of one name in a scope in the order it builds them
(``adam/AssignAddVariableOp``, ``adam/AssignAddVariableOp_1``, ...); the same
program traced again, at another batch size say, may number the same op
otherwise. Matched by name, the op then reads "new" on one side and "vanished"
on the other. So ops are matched by what they are: their scope and op name
without the ``_N`` suffix (for TensorFlow's default names, the op's type),
then their shape, then their order:

1. the same name and the same largest shape;
2. within a scope and type, the same largest shape, in the order of the suffixes;
3. the same name (a batch size changes an activation's shape, not what it is).

The rest are on one side only: an op of another shape is another op (Adam's
``Sub_2`` of one weight's shape is not its ``Sub_10`` of another's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from traceparse.gate.figures import OpFigures

# A TensorFlow name suffix: "MatMul_1" is the second op named MatMul in its scope.
_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")


def _kind(key: str) -> tuple[str, int]:
    """(the key without the ``_N`` suffix of its last part, N or 0)."""
    scope, _, last = key.rpartition("/")
    match = _SUFFIX.match(last)
    assert match is not None  # the pattern matches any text
    base = match.group(1) or last
    number = int(match.group(2)) if match.group(2) and match.group(1) else 0
    return (f"{scope}/{base}" if scope else base), number


def _shape(figures: OpFigures) -> str | None:
    return figures.shapes[0] if figures.shapes else None


def match_ops(
    before: Mapping[str, OpFigures], after: Mapping[str, OpFigures]
) -> list[tuple[str | None, str | None]]:
    """Pairs (key before, key after) of the same op, one side None where the op is on
    one side only; every key of each side is in exactly one pair."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for side, keys in enumerate((before, after)):
        for key in keys:
            groups.setdefault(_kind(key)[0], ([], []))[side].append(key)
    pairs: list[tuple[str | None, str | None]] = []
    for left, right in groups.values():
        left.sort(key=lambda k: _kind(k)[1])
        right.sort(key=lambda k: _kind(k)[1])
        rules: tuple[Callable[[str, str], bool], ...] = (
            lambda a, b: a == b and _shape(before[a]) == _shape(after[b]),
            lambda a, b: _shape(before[a]) is not None and _shape(before[a]) == _shape(after[b]),
            lambda a, b: a == b,
        )
        for same in rules:
            pairs += _pair(left, right, same)
        pairs += [(a, None) for a in left] + [(None, b) for b in right]
    return pairs


def _pair(
    left: list[str], right: list[str], same: Callable[[str, str], bool]
) -> Iterable[tuple[str, str]]:
    """Pairs each key of ``left`` with the first unpaired key of ``right`` that is the
    ``same`` op; both lists lose the paired keys."""
    found = []
    for a in list(left):
        b = next((b for b in right if same(a, b)), None)
        if b is not None:
            left.remove(a)
            right.remove(b)
            found.append((a, b))
    return found
