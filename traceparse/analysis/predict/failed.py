"""The request a capture ended in: what the allocator refused, asked again at
another batch size.

A capture that ends in an out-of-memory error (``analysis/failure.py``) holds
every allocation the program made up to the request that failed, but not that
request. TensorFlow's BFC allocator refuses it when no free chunk fits and its
regions cannot grow past the memory limit (``BFCAllocator::AllocateRaw``
returns null, tensorflow/tsl/framework/bfc_allocator.cc), and the kernel raises
``ResourceExhaustedError`` with the tensor's shape and dtype
(``OpKernelContext::allocate_tensor``, tensorflow/core/framework/op_kernel.cc).
The same program asks for it at the same moment of the same step in every run,
at any batch size. So a prediction from such a capture asks for it too: at the
moment of failure (``Failure.time_ps``, the latest allocation before it) the
counter plus the request, sized from its shape as any allocation is
(``batch.sizing``: a tensor led by the batch grows with it). Without it, the
prediction at the batch that failed would be the counter's peak, which did fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.failure import Failure
from traceparse.tables.select import equal_to

# The columns the sizing rules read of an allocation (``batch.sizing``).
SIZED_COLUMNS = ("shape", "op", "op_type", "dtype")


@dataclass(frozen=True)
class FailedRequest:
    """One allocator's refused request and the moment it was made."""

    host: str
    allocator: str
    event: int  # timeline row of the moment of failure
    op: str | None
    op_type: str | None
    shape: str | None
    dtype: str | None
    requested_bytes: int

    @property
    def key(self) -> tuple[object, object]:
        return (self.host, self.allocator)

    def label(self) -> str:
        """The request as TensorFlow's message names it: op, dtype and shape."""
        what = " ".join(str(p) for p in (self.dtype, self.shape) if p)
        return f"{self.op or 'an unnamed op'}" + (f" ({what})" if what else "")


def failed_requests(
    failures: Sequence[Failure], timeline: pd.DataFrame
) -> tuple[FailedRequest, ...]:
    """The out-of-memory requests of ``failures`` placed on ``timeline``: each at
    its allocator's latest allocation at the moment of failure (the row
    ``Failure.time_ps`` names). A failure that states no request, names no
    allocator of the capture, or has no moment is left out: nothing to ask again."""
    out = []
    times = timeline["time_ps"].to_numpy(dtype=np.int64)
    grew = timeline["delta_bytes"].to_numpy(dtype=np.float64, na_value=0.0) > 0
    for failure in failures:
        if not failure.out_of_memory or failure.requested_bytes is None:
            continue
        if failure.allocator is None or failure.time_ps is None:
            continue
        at = np.flatnonzero(
            equal_to(timeline["host"], failure.host)
            & equal_to(timeline["allocator"], failure.allocator)
            & (times == failure.time_ps)
        )
        if not len(at):
            continue
        made = at[grew[at]]
        out.append(
            FailedRequest(
                host=failure.host,
                allocator=failure.allocator,
                event=int((made if len(made) else at)[-1]),
                op=failure.op,
                op_type=failure.op_type,
                shape=failure.shape,
                dtype=failure.dtype,
                requested_bytes=int(failure.requested_bytes),
            )
        )
    return tuple(out)


def with_failed(allocations: pd.DataFrame, failed: Sequence[FailedRequest]) -> pd.DataFrame:
    """The columns the sizing rules read (``SIZED_COLUMNS``) of ``allocations``,
    with a row per failed request after them: sized among the capture's own
    tensors (their shapes are the evidence of what grows), each failed request is
    a tensor of the same program. Categorical columns stay categorical."""
    columns = {}
    for name in SIZED_COLUMNS:
        values = [getattr(f, name) for f in failed]
        if name not in allocations:
            columns[name] = pd.Series([None] * (len(allocations) + len(failed)), dtype=object)
            continue
        column = allocations[name].reset_index(drop=True)
        if isinstance(column.dtype, pd.CategoricalDtype):
            new = [v for v in dict.fromkeys(values) if v is not None]
            new = [v for v in new if v not in column.cat.categories]
            column = column.cat.add_categories(new) if new else column
            added = pd.Series(pd.Categorical(values, dtype=column.dtype))
        else:
            column = column.astype(object)
            added = pd.Series(values, dtype=object)
        columns[name] = pd.concat([column, added], ignore_index=True)
    return pd.DataFrame(columns)


def ran_before(allocations: pd.DataFrame, request: FailedRequest, ends: np.ndarray) -> bool:
    """Whether an earlier run of the request that failed went on: an allocation of
    its op and shape on the same allocator made and freed before the failure (in
    an earlier step: an op's other buffers, its temporaries, differ in shape).
    Then the capture shows what the step does after it. TensorFlow's message
    names the node as its graph does (``model/layer/Relu``); the capture's op
    names carry the scopes of the calls around it
    (``StatefulPartitionedCall/model/layer/Relu``), so a name ending in the
    node's matches. ``ends``: each allocation's free event (``Profile._ends``)."""
    if not request.op or "op" not in allocations:
        return False
    op = allocations["op"].astype(object)
    names = pd.Series(pd.unique(op.dropna()), dtype=object).astype(str)
    matched = set(names[(names == request.op) | names.str.endswith("/" + request.op)])
    if not matched:
        return False
    before = (
        op.isin(matched).to_numpy(dtype=bool)
        & equal_to(allocations["host"], request.host)
        & equal_to(allocations["allocator"], request.allocator)
        & (allocations["alloc_event"].to_numpy(dtype=np.int64) < request.event)
        & (ends >= 0)
        & (ends < request.event)
    )
    if request.shape is not None and "shape" in allocations:
        before &= equal_to(allocations["shape"], request.shape)
    return bool(before.any())
