"""What a prediction is made from: one capture's tables gathered into a ``Capture``,
the checks on the batch sizes and on a second capture, and ``predictor_from``, the
entry point ``Profile.predictor`` and ``traceparse.predictor_of`` call.

Moved here from ``core/profile.py`` (issue 46): ``Profile`` hands a
``PredictSource`` over and caches the answer; the rules live with the prediction.
``Profile`` imports this module only when a prediction is asked for: the summary
never loads prediction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.failure import Failure
from traceparse.analysis.naming import KnownNames
from traceparse.analysis.predict.capacity import MAX_BATCH
from traceparse.analysis.predict.failed import failed_requests
from traceparse.analysis.predict.predictor import Capture, Predictor, make_predictor
from traceparse.decode.batch import BatchRecord
from traceparse.decode.variables import quote
from traceparse.decode.xla import XlaProgram
from traceparse.errors import PredictArgumentError, UsageError

__all__ = [
    "PredictSource",
    "check_batches",
    "check_pair",
    "checked_batch",
    "op_share",
    "prediction_input",
    "predictor_from",
]


@dataclass(frozen=True)
class PredictSource:
    """One capture as a prediction reads it: its files, its tables, the batch it
    recorded, and ``capture`` (the ``Capture``, built only when a prediction is made)."""

    path: str
    paths: list[str]
    allocators: list[str]
    allocations: pd.DataFrame
    timeline: pd.DataFrame
    recorded_batch: BatchRecord | None
    capture: Callable[[], Capture]


def prediction_input(
    allocations: pd.DataFrame,
    timeline: pd.DataFrame,
    ends: np.ndarray,
    known: KnownNames,
    shapes: dict[str, str],
    peak: pd.DataFrame,
    breakdown: pd.DataFrame,
    variables: pd.DataFrame | None,
    xla_buffers: pd.DataFrame,
    xla_parameters: pd.DataFrame,
    programs: Sequence[tuple[str, XlaProgram]] | None,
    stacks: pd.DataFrame | None = None,
    failures: Sequence[Failure] = (),
    op_names: frozenset[str] = frozenset(),
) -> Capture:
    """The ``Capture`` of one profile's tables; ``programs`` (None: the capture kept
    no XLA programs) give each linked slab's buffers at its program's peak,
    ``stacks`` are the recorded Python stacks (None without a source record),
    ``failures`` the failures the capture ended in (``Profile.failures``),
    ``op_names`` the ops its op events ran (``Capture.op_names``)."""
    fill = {}
    if programs is not None:
        linked = allocations[
            allocations["xla_program"].notna() & allocations["xla_allocation_index"].notna()
        ]
        wanted = set(
            zip(
                linked["host"].astype(str),
                linked["xla_program"].astype(str),
                linked["xla_allocation_index"].astype(int),
                strict=True,
            )
        )
        from traceparse.analysis.predict.xla import slab_spans

        fill = slab_spans(programs, wanted)
    return Capture(
        allocations,
        timeline,
        ends,
        known,
        shapes,
        peak,
        breakdown,
        variables,
        xla_buffers,
        xla_parameters,
        fill,
        stacks,
        failed_requests(failures, timeline),
        op_names,
    )


def checked_batch(value: object, what: str = "batch_size") -> int:
    """``value`` as a batch size: a whole number (``TypeError`` for a float, a bool,
    NaN or text) from 1 to ``MAX_BATCH`` (``PredictArgumentError``, a ValueError,
    otherwise). MAX_BATCH is the largest batch the capacity search tries
    (analysis/predict/capacity.py); past it a batch is a typo, and the sizes
    scaled to it would leave int64."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a whole number, not {value!r}")
    number = int(value)
    if not 1 <= number <= MAX_BATCH:
        shown = f"{number:,}" if abs(number) < 10**30 else f"a {len(str(abs(number)))}-digit number"
        raise PredictArgumentError(
            f"{what} must be a positive whole number up to {MAX_BATCH:,}, not {shown}"
        )
    return number


def check_pair(
    mine: PredictSource, other: PredictSource, from_batch: int | None, other_batch: int | None
) -> None:
    """Refuse an ``other`` that cannot be fitted with ``mine``: the same capture,
    the same batch given twice, or another program.

    A fit through two captures needs the same program at two batch sizes. The
    batch changes allocations' sizes, not which ops make them: TensorFlow names
    a graph's nodes after the model's code (scopes from layer names), so the
    same program's captures share allocators and nearly all op names (seen:
    94 to 100% of the bytes on every pair of the predict fixtures; 0.4 to 59%
    between different models). Less than half of either capture's bytes under
    ops the other has is another program."""
    if sorted(mine.paths) == sorted(other.paths):
        raise UsageError(
            f"{other.path}: --with names the capture PATH already is; give a capture of "
            "the same program at another batch size"
        )
    if from_batch is not None and other_batch is not None and from_batch == other_batch:
        raise UsageError(
            f"{other.path}: --with-batch {other_batch} is PATH's own batch; a fit needs two "
            "batch sizes"
        )
    ours, theirs = set(mine.allocators), set(other.allocators)
    if not ours & theirs:
        raise UsageError(
            f"{other.path}: none of its allocators ({', '.join(sorted(theirs)) or 'none'}) is "
            f"one of PATH's ({', '.join(sorted(ours)) or 'none'}), so nothing can be fitted "
            "through both: --with needs a capture of the same program on the same devices"
        )
    unmatched = []
    for a, b, names in ((mine, other, ("PATH", "OTHER")), (other, mine, ("OTHER", "PATH"))):
        share, missing = op_share(a.allocations, b.allocations)
        if share < 0.5:
            unmatched.append((names, share, missing))
    if unmatched:
        parts = [
            f"{share:.0%} of {first}'s bytes are by ops {second} has (not in {second}: "
            f"{', '.join(missing)})"
            for (first, second), share, missing in unmatched
        ]
        raise UsageError(
            f"{other.path}: not the program PATH captured: {'; '.join(parts)}. --with needs "
            "the same program at another batch size"
        )


def op_share(allocations: pd.DataFrame, others: pd.DataFrame) -> tuple[float, list[str]]:
    """The share of ``allocations``' requested bytes made by (allocator, op) pairs
    ``others`` has too (op names with Keras' auto-numbered scopes renumbered alike,
    ``program_names``), and up to three of the largest that it lacks."""
    from traceparse.analysis.predict.fit import program_names

    a, b = allocations, others
    if a.empty:
        return 1.0, []
    keys = pd.MultiIndex.from_arrays([a["allocator"].astype(str), program_names(a["op"])])
    theirs = pd.MultiIndex.from_arrays([b["allocator"].astype(str), program_names(b["op"])])
    found = keys.isin(theirs)
    size = a["requested_bytes"].fillna(0).to_numpy(dtype=np.float64)
    total = float(size.sum())
    share = float(size[found].sum()) / total if total > 0 else float(found.mean())
    lacking = pd.Series(size[~found], index=a["op"].astype(str)[~found].to_numpy())
    missing = lacking.groupby(level=0).sum().sort_values(ascending=False).head(3).index
    return share, [quote(name, 60) for name in missing]


def predictor_from(
    source: PredictSource,
    batch_size: int | None = None,
    from_batch: int | None = None,
    other: PredictSource | None = None,
    other_batch: int | None = None,
) -> Predictor:
    """A Predictor of ``source`` (captured at ``from_batch``, else at the batch the
    capture recorded, else read off it), fitted through ``other`` (at ``other_batch``,
    else recorded, else read) when given; with two captures the one nearer
    ``batch_size`` gives the order of events. A capture it cannot read a prediction
    from raises ``UsageError`` naming its file.

    A recorded batch (``Profile.recorded_batch``) comes before anything read off the
    shapes: it is what the steps were fed, where the shapes only suggest it."""
    for capture in (source, other):
        if capture is not None and capture.timeline.empty:
            raise UsageError(
                f"{capture.path}: the capture has no memory events, so there is nothing "
                "to predict from"
            )
    if other is not None:
        # What the user gave is checked as given; a batch equal on both records is
        # fit_two's refusal (both captures at one batch).
        check_pair(source, other, from_batch, other_batch)
    recorded = source.recorded_batch if from_batch is None else None
    if recorded is not None:
        from_batch = recorded.batch_size
    if other is not None and other_batch is None and other.recorded_batch is not None:
        other_batch = other.recorded_batch.batch_size
    try:
        predictor = make_predictor(
            source.capture(),
            from_batch,
            None if other is None else other.capture(),
            batch_size,
            other_batch,
        )
    except UsageError as exc:
        paths = source.path if other is None else f"{source.path} (with {other.path})"
        raise UsageError(f"{paths}: {exc}") from None
    if recorded is not None and predictor.batch == recorded.batch_size:
        predictor.batch_evidence = recorded.evidence
        if predictor.found_batch != recorded.batch_size:
            # As for a batch given that the shapes disagree with: say what they say.
            predictor.batch_evidence += f"; read off the capture: {predictor.found_evidence}"
    return predictor


def check_batches(**batches: int | None) -> None:
    """``checked_batch`` on each batch given (by its argument's name); None is not given."""
    for name, value in batches.items():
        if value is not None:
            checked_batch(value, name)
