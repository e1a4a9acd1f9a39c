"""Each row made in the capture placed: its layer, role, replica and scope.

``place`` names the rows of a breakdown (and of a prediction's parts) from their
ops, by the rules of ``layers.place_op`` for the generation that wrote the
capture; an optimizer's temporary takes the layer of the weight whose shape it
has (``owners.shape_key``). ``NO_TF_OP`` and ``NO_SCOPE`` are the names given to
what has no TF op or no scope, so no view groups bytes under NA.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceparse.analysis.naming.generations import KERAS3
from traceparse.analysis.naming.layers import (
    NO_LAYER,
    OPTIMIZER_ROLES,
    OPTIMIZER_UNASSIGNED,
    OTHER,
    UNKNOWN,
    KnownNames,
    model_scopes,
    optimizer_op_roles,
    place_op,
)
from traceparse.analysis.naming.owners import shape_key
from traceparse.tables.xla import XLA_ARGS

# The op of an HLO buffer (or program value) whose TF op the module does not
# say: one explicit name in every view, so those bytes never group under NA.
NO_TF_OP = "(XLA buffer, no TF op)"
# The scope of ops that sit in no name scope (TF names cannot contain parentheses).
NO_SCOPE = "(top level)"
# The columns ``place`` adds.
PLACED_COLUMNS = ("layer", "role", "replica", "scope")


def place(rows: pd.DataFrame, known: KnownNames, shapes: dict[str, str]) -> None:
    """Add ``layer``, ``role``, ``replica`` and ``scope`` to rows made in the capture."""
    if rows.empty:
        for column in PLACED_COLUMNS:
            rows[column] = pd.Series(dtype=object)
        return
    ids, distinct = placed(rows, known, shapes)
    for column in PLACED_COLUMNS:
        rows[column] = distinct[column].to_numpy()[ids]


def placed(
    rows: pd.DataFrame, known: KnownNames, shapes: dict[str, str]
) -> tuple[np.ndarray, pd.DataFrame]:
    """``place`` of each distinct (op, op type, shape) of ``rows`` once: per row, the
    index of its distinct one; the distinct ones with their places. A row's place
    reads only its own op, type and shape, and a capture's steps repeat them."""
    columns = ["op", "op_type"] + (["shape"] if shapes else [])
    codes = [_codes(rows[c]) for c in columns]
    if any(code is None for code in codes):  # values that do not hash: row by row
        every = rows[columns].copy()
        _place_each(every, known, shapes)
        return np.arange(len(rows), dtype=np.int64), every
    ids, first = first_ids(*codes)  # type: ignore[arg-type]
    distinct = rows[columns].iloc[first].reset_index(drop=True)
    _place_each(distinct, known, shapes)
    return ids, distinct


def _codes(column: pd.Series) -> np.ndarray | None:
    """A column's values as integer codes (-1: missing); None where they do not hash."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(dtype=np.int64)
    try:
        return pd.factorize(column.to_numpy(dtype=object))[0].astype(np.int64)
    except TypeError:  # a list (a shape given as one)
        return None


def first_ids(*codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the index of its combination of ``codes`` (integer arrays) among the
    distinct ones, numbered in order of first appearance; and per distinct one,
    its first row."""
    n = len(codes[0]) if codes else 0
    key = np.zeros(n, dtype=np.int64)
    room = 1
    for code in codes:
        code = np.asarray(code, dtype=np.int64)
        code = code - int(code.min(initial=0))  # -1 (missing) is a value of its own
        span = int(code.max(initial=0)) + 1
        if room * span >= 2**62:  # no room left in an int64 key: renumber first
            key = pd.factorize(key)[0].astype(np.int64)
            room = int(key.max(initial=0)) + 1
        key = key * span + code
        room *= span
    inverse, uniques = pd.factorize(key)
    first = np.empty(len(uniques), dtype=np.int64)
    # Written back to front, so each distinct key keeps its first row.
    first[inverse[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    return inverse.astype(np.int64), first


def _place_each(rows: pd.DataFrame, known: KnownNames, shapes: dict[str, str]) -> None:
    """``place`` of every row of ``rows`` (not empty)."""
    ops = pd.Categorical(rows["op"].astype(object))
    codes = ops.codes
    names = [str(op) for op in ops.categories]
    placed = [known.placed(op) for op in names] + [place_op(None, known)]
    layer = np.asarray([p.layer for p in placed], dtype=object)[codes]
    kind = np.asarray([p.kind for p in placed], dtype=object)[codes]
    replica = np.asarray([p.replica for p in placed], dtype=np.int64)[codes]
    # An XLA argument's copy (typed XLA_Args, named after the op reading it) is
    # the layer's but not that op's output: a weight's or an input's copy.
    op_types = rows["op_type"].astype(object).to_numpy()
    kind[op_types == XLA_ARGS] = OTHER
    # An optimizer's assign that allocated holds a variable it keeps
    # (layers.optimizer_op_roles).
    kind = optimizer_op_roles(kind, op_types)
    optimizer = np.isin(kind, OPTIMIZER_ROLES)
    if shapes:
        # An optimizer's temporary or slot the shape of one layer's weight: optimizer
        # bytes of that layer, however the capture was made (with an inventory or
        # without, eager or compiled), so "what does Adam cost" and "what does the
        # layer cost" read the same in every capture.
        keys = [shape_key(s) for s in rows["shape"].tolist()]
        tied = np.asarray([shapes.get(k, "") if k else "" for k in keys], dtype=object)
        mask = optimizer & (layer == OPTIMIZER_UNASSIGNED) & (tied != "")
        layer[mask] = tied[mask]
    # An op named by its type alone (an eager op: ``Mul``, ``_MklMatMul``) or by
    # nothing says no part of training: unknown, not other (which is what a scope
    # outside the model's layers says: a loss, a user's name scope). The recorded
    # stacks may say more (``stacks.place_by_stack``).
    bare = np.asarray([_bare(op) for op in names] + [True], dtype=bool)[codes]
    kind[bare & (kind == OTHER) & (layer == NO_LAYER)] = UNKNOWN
    scopes = [_scope(op, known) for op in names] + [None]
    rows["layer"], rows["role"], rows["replica"] = layer, kind, replica
    rows["scope"] = np.asarray(scopes, dtype=object)[codes]


def _bare(op: str) -> bool:
    """Whether an op's name has no scope at all (``Mul``; not an XLA buffer's marker)."""
    return "/" not in op and op != NO_TF_OP


def _scope(op: str, known: KnownNames) -> str:
    """An op's scope path relative to its model (``scope_of`` takes its prefixes); by
    the op names' own rules in a Keras 3 capture (scopes read no inventory)."""
    if op == NO_TF_OP:
        return NO_TF_OP  # names no scope: one row of its own
    parts = model_scopes(op) if known.generation == KERAS3 else model_scopes(op, known)
    return "/".join(parts) if parts else NO_SCOPE
