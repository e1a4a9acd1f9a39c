"""Memory budgets: what a CI gate checks, and one result per (budget, host, allocator).

Every budget is judged per allocator of each host, from ``Profile.summary()``,
``Profile.live_at_peak``, ``Profile.leaks()`` and a baseline's figures:

- ``max-peak``: bytes in use at the allocator's peak (reserved + allocated,
  xprof's rule) may not exceed the limit;
- ``max-utilisation``: peak / capacity (capacity = in use + available at the
  peak); skipped when the capture does not record capacity;
- ``max-padding``: padding bytes (chunk minus request) / bytes held by the
  allocations live at the peak;
- ``no-leaks``: the allocator may not be judged "growing" step over step;
  skipped when there are too few marked steps to judge;
- ``baseline``: the peak may not grow beyond the baseline's peak plus the
  tolerance. An allocator in the baseline but missing from the capture fails;
  one missing from the baseline is skipped.

A result is ``pass``, ``fail`` or ``skip`` (could not be judged, with the
reason); only ``fail`` breaches the gate.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from traceparse.errors import InputError, UsageError
from traceparse.gate.baseline import Baseline, read_baseline
from traceparse.gate.figures import NO_OP, AllocatorFigures, figures_of, pair_allocators
from traceparse.gate.matching import match_ops
from traceparse.output.cells import MAX_CELL_WIDTH, shorten
from traceparse.output.sentences import leak_growth, leak_reason
from traceparse.output.units import (
    format_bytes,
    format_change,
    format_percent,
    parse_bytes,
    parse_percent,
)
from traceparse.records import LeakVerdict

if TYPE_CHECKING:
    from traceparse.records import AllocatorRecord
    from traceparse.records.source import RecordSource

__all__ = [
    "BUDGET_NAMES",
    "Budgets",
    "Contributor",
    "Result",
    "Tolerance",
    "evaluate",
]

BUDGET_NAMES = ("max-peak", "max-utilisation", "max-padding", "no-leaks", "baseline")
Status = Literal["pass", "fail", "skip"]
Unit = Literal["bytes", "fraction", "bytes_per_step"]

# Contributors named on a result's line.
CONTRIBUTORS = 3


@dataclass(frozen=True)
class Tolerance:
    """How much a baseline's peak may grow: a fraction (``5%``) or bytes (``64MiB``)."""

    fraction: float = 0.0
    bytes: int = 0

    @classmethod
    def parse(cls, text: str | float | Tolerance) -> Tolerance:
        """``"5%"``/``0.05`` -> 5 %; ``"64MiB"`` -> 64 MiB; ``UsageError`` otherwise."""
        if isinstance(text, Tolerance):
            return text
        raw = str(text).strip()
        if raw and raw[-1].isalpha():
            try:
                return cls(bytes=parse_bytes(raw))
            except UsageError:
                raise UsageError(
                    f"invalid tolerance {text!r}: give a percentage such as 5% or a size "
                    "such as 64MiB"
                ) from None
        return cls(fraction=parse_percent(text))

    def allowed(self, base: int) -> int:
        """The most bytes allowed for a baseline figure of ``base`` bytes."""
        return base + int(base * self.fraction) + self.bytes

    def __str__(self) -> str:
        if self.bytes:
            return format_bytes(self.bytes)
        return format_percent(self.fraction, digits=_digits(self.fraction))


DEFAULT_TOLERANCE = Tolerance(fraction=0.05)


@dataclass(frozen=True)
class Budgets:
    """The budgets to check; ``None``/``False`` leaves a budget unchecked."""

    max_peak: int | None = None
    max_utilisation: float | None = None
    max_padding: float | None = None
    no_leaks: bool = False
    baseline: Baseline | None = None
    tolerance: Tolerance = DEFAULT_TOLERANCE
    allocator: str | None = None
    allow_empty: bool = False
    # What a baseline compares: the peak's requests (the peak less the allocator's
    # padding, not the allocator's luck) or its bytes in use.
    compare: str = "requested"

    @classmethod
    def from_options(
        cls,
        *,
        max_peak: str | int | None = None,
        max_utilisation: str | float | None = None,
        max_padding: str | float | None = None,
        no_leaks: bool = False,
        baseline: str | os.PathLike[str] | Baseline | None = None,
        tolerance: str | float | Tolerance = DEFAULT_TOLERANCE,
        allocator: str | None = None,
        allow_empty: bool = False,
        compare: str = "requested",
    ) -> Budgets:
        """Budgets from values as people write them (``"2GiB"``, ``"90%"``); ``UsageError``."""
        if baseline is not None and not isinstance(baseline, Baseline):
            baseline = read_baseline(baseline)  # a capture is loaded by the caller
        return cls(
            max_peak=None if max_peak is None else parse_bytes(max_peak),
            max_utilisation=None if max_utilisation is None else parse_percent(max_utilisation),
            max_padding=None if max_padding is None else parse_percent(max_padding),
            no_leaks=bool(no_leaks),
            baseline=baseline,
            tolerance=Tolerance.parse(tolerance),
            allocator=allocator,
            allow_empty=bool(allow_empty),
            compare=compare,
        )

    @property
    def empty(self) -> bool:
        """True when no budget is set."""
        return (
            self.max_peak is None
            and self.max_utilisation is None
            and self.max_padding is None
            and not self.no_leaks
            and self.baseline is None
        )


@dataclass(frozen=True)
class Contributor:
    """Something that holds bytes behind a result: a tensor, an op, an op's growth."""

    name: str
    bytes: int
    detail: str = ""
    signed: bool = False

    def __str__(self) -> str:
        # Capped as a table cell is: a 100 KB op name would be the whole line.
        name = shorten(self.name, MAX_CELL_WIDTH)
        text = f"{name} {format_bytes(self.bytes, signed=self.signed)}"
        return f"{text} ({self.detail})" if self.detail else text


@dataclass(frozen=True)
class Result:
    """One budget judged for one allocator of one host."""

    budget: str
    host: str
    allocator: str
    status: Status
    message: str
    measured: float | None = None
    allowed: float | None = None
    unit: Unit = "bytes"
    contributors: tuple[Contributor, ...] = field(default=())
    # What a passing result does not judge and the reader should know (None: nothing).
    caveat: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def where(self) -> str:
        return f"{self.allocator} on {self.host}"

    def line(self) -> str:
        """One line: the budget, the allocator, measured vs allowed, the top contributors."""
        text = f"{self.budget}: {self.where}: {self.message}"
        if self.contributors:
            text += "; top: " + ", ".join(str(c) for c in self.contributors[:CONTRIBUTORS])
        return text

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["contributors"] = [asdict(c) for c in self.contributors]
        return data


def evaluate(profile: RecordSource, budgets: Budgets) -> list[Result]:
    """Judge every budget for every allocator (or only ``budgets.allocator``) of ``profile``.

    Raises ``UsageError`` for an allocator the capture lacks, and ``InputError``
    when the capture has no memory events (nothing could be measured) unless
    ``budgets.allow_empty``.
    """
    summaries = profile.summary()
    if budgets.allocator is not None:
        known = sorted({s.allocator for s in summaries})
        if budgets.allocator not in known:
            raise UsageError(
                f"no allocator named {budgets.allocator!r} in {profile.path}; its allocators "
                f"are: {', '.join(known) or 'none (no memory events)'}"
            )
        summaries = [s for s in summaries if s.allocator == budgets.allocator]
    if not summaries:
        if budgets.allow_empty:
            return []
        raise InputError(
            f"{profile.path}: the capture has no memory events, so no budget can be checked "
            "(the host tracer level was below 2, the allocator records no events, or every "
            "allocation was too small to be recorded); pass --allow-empty to accept that",
            profile.path,
        )
    results: list[Result] = []
    for summary in summaries:
        if budgets.max_peak is not None:
            results.append(_peak(profile, summary, budgets.max_peak))
        if budgets.max_utilisation is not None:
            results.append(_utilisation(profile, summary, budgets.max_utilisation))
        if budgets.max_padding is not None:
            results.append(_padding(profile, summary, budgets.max_padding))
        if budgets.no_leaks:
            results.append(_leaks(profile, summary))
    if budgets.baseline is not None:
        results.extend(_baseline(profile, budgets))
    order = {name: i for i, name in enumerate(BUDGET_NAMES)}
    return sorted(results, key=lambda r: (r.host, r.allocator, order[r.budget]))


# -- the budgets --------------------------------------------------------------


def _peak(profile: RecordSource, s: AllocatorRecord, limit: int) -> Result:
    over = s.peak_bytes - limit
    failed = over > 0
    message = f"peak {format_bytes(s.peak_bytes)} {'>' if failed else '<='} allowed " + (
        f"{format_bytes(limit)} ({format_bytes(over, signed=True)}, {format_change(over, limit)})"
        if failed
        else format_bytes(limit)
    )
    return Result(
        "max-peak",
        s.host,
        s.allocator,
        "fail" if failed else "pass",
        message,
        measured=s.peak_bytes,
        allowed=limit,
        contributors=_top_tensors(profile, s) if failed else (),
    )


def _utilisation(profile: RecordSource, s: AllocatorRecord, limit: float) -> Result:
    if s.utilisation is None or not s.capacity_bytes:
        return Result(
            "max-utilisation",
            s.host,
            s.allocator,
            "skip",
            "capacity unknown (the memory events carry no bytes_available), so utilisation "
            "cannot be checked",
            allowed=limit,
            unit="fraction",
        )
    failed = s.utilisation > limit
    message = (
        f"utilisation {_pct(s.utilisation)} ({format_bytes(s.peak_bytes)} of "
        f"{format_bytes(s.capacity_bytes)}) {'>' if failed else '<='} allowed {_pct(limit)}"
    )
    return Result(
        "max-utilisation",
        s.host,
        s.allocator,
        "fail" if failed else "pass",
        message,
        measured=s.utilisation,
        allowed=limit,
        unit="fraction",
        contributors=_top_tensors(profile, s) if failed else (),
    )


def _padding(profile: RecordSource, s: AllocatorRecord, limit: float) -> Result:
    padding = s.attribution["padding_bytes"]
    # What the allocations live at the peak hold, compiled programs' buffers included.
    held = s.live_at_peak_bytes
    fraction = padding / held if held > 0 else 0.0
    failed = fraction > limit
    message = (
        f"padding {_pct(fraction)} ({format_bytes(padding)} of the {format_bytes(held)} held "
        f"by allocations live at the peak) {'>' if failed else '<='} allowed {_pct(limit)}"
    )
    return Result(
        "max-padding",
        s.host,
        s.allocator,
        "fail" if failed else "pass",
        message,
        measured=fraction,
        allowed=limit,
        unit="fraction",
        contributors=_top_padding(profile, s) if failed else (),
    )


def _leaks(profile: RecordSource, s: AllocatorRecord) -> Result:
    report = profile.leaks()
    rate = s.growth_bytes_per_step
    if s.leak_verdict is LeakVerdict.GROWING:
        from traceparse.records import owned

        by_op = owned(report.by_op, s.host, s.allocator)
        contributors = tuple(
            Contributor(
                _op_name(row.op),
                int(row.bytes),
                f"{int(row.count)} allocation{'s' if int(row.count) != 1 else ''} still live",
            )
            for row in by_op.head(CONTRIBUTORS).itertuples(index=False)
        )
        return Result(
            "no-leaks",
            s.host,
            s.allocator,
            "fail",
            f"growing {format_bytes(rate or 0, signed=True)} per step, allowed no growth",
            measured=rate,
            allowed=0,
            unit="bytes_per_step",
            contributors=contributors,
        )
    if s.leak_verdict == "stable":
        return Result(
            "no-leaks",
            s.host,
            s.allocator,
            "pass",
            f"stable ({leak_growth(s.leak)})",
            measured=rate,
            allowed=0,
            unit="bytes_per_step",
        )
    return Result(
        "no-leaks",
        s.host,
        s.allocator,
        "skip",
        f"cannot judge growth: {leak_reason(s.leak)}",
        allowed=0,
        unit="bytes_per_step",
    )


def _baseline(profile: RecordSource, budgets: Budgets) -> list[Result]:
    assert budgets.baseline is not None
    tolerance = budgets.tolerance
    current = figures_of(profile)
    base = budgets.baseline.allocators
    if budgets.allocator is not None:
        current = [f for f in current if f.allocator == budgets.allocator]
        base = [f for f in base if f.allocator == budgets.allocator]
    results: list[Result] = []
    for now, before in pair_allocators(current, base):
        if now is None:
            assert before is not None
            results.append(
                Result(
                    "baseline",
                    before.host,
                    before.allocator,
                    "fail",
                    f"in the baseline (peak {format_bytes(before.peak_bytes)}) but not in this "
                    "capture",
                    allowed=tolerance.allowed(before.peak_bytes),
                )
            )
        elif before is None:
            results.append(
                Result(
                    "baseline",
                    now.host,
                    now.allocator,
                    "skip",
                    f"not in the baseline (peak {format_bytes(now.peak_bytes)}); record a new "
                    "baseline to check it",
                    measured=now.peak_bytes,
                )
            )
        else:
            results.append(_against(now, before, tolerance, budgets.compare))
    return results


def _against(
    now: AllocatorFigures, before: AllocatorFigures, tolerance: Tolerance, compare: str
) -> Result:
    requested = compare == "requested"
    then = before.requested_peak_bytes if requested else before.peak_bytes
    measured = now.requested_peak_bytes if requested else now.peak_bytes
    allowed = tolerance.allowed(then)
    delta = measured - then
    failed = measured > allowed
    what = "requested at the peak" if requested else "peak"
    message = (
        f"{what} {format_bytes(measured)} vs baseline {format_bytes(then)} "
        f"({format_bytes(delta, signed=True)}, {format_change(delta, then)}) "
        f"{'>' if failed else '<='} allowed {format_bytes(allowed)} (tolerance {tolerance})"
    )
    caveat = None
    grew = now.peak_bytes - before.peak_bytes
    if requested and not failed and now.peak_bytes > tolerance.allowed(before.peak_bytes):
        # The default compares requests so a chunk handed out by chance does not fail
        # CI; a peak in use that grew past the tolerance must still be seen.
        caveat = (
            f"the peak in use grew {format_bytes(grew, signed=True)} "
            f"({format_change(grew, before.peak_bytes)}), past the tolerance, while the "
            "bytes requested did not; --compare requested (the default) judges the "
            "requests, --compare allocated the peak in use"
        )
    field = "live_at_peak_requested_bytes" if requested else "live_at_peak_bytes"
    contributors: tuple[Contributor, ...] = ()
    if failed:
        grown = []
        # The same op though TensorFlow numbered it otherwise (gate/matching.py),
        # as diff matches them; named as it is now.
        for was, op in match_ops(before.ops, now.ops):
            after_bytes = getattr(now.ops[op], field) if op is not None else 0
            before_bytes = getattr(before.ops[was], field) if was is not None else 0
            if after_bytes > before_bytes and op is not None:
                grown.append((after_bytes - before_bytes, op, before_bytes, after_bytes, was))
        grown.sort(key=lambda g: (-g[0], g[1]))
        # "new" as diff says it: an op the baseline does not have at all. One it
        # has, not live at its peak then, changed (0 B -> ...).
        contributors = tuple(
            Contributor(
                op,
                d,
                f"{format_bytes(b)} -> {format_bytes(a)} at the peak" if was is not None else "new",
                signed=True,
            )
            for d, op, b, a, was in grown[:CONTRIBUTORS]
        )
    return Result(
        "baseline",
        now.host,
        now.allocator,
        "fail" if failed else "pass",
        message,
        measured=measured,
        allowed=allowed,
        contributors=contributors,
        caveat=caveat,
    )


# -- contributors -------------------------------------------------------------


def _top_tensors(profile: RecordSource, s: AllocatorRecord) -> tuple[Contributor, ...]:
    live = profile.live_at_peak(allocator=s.allocator, host=s.host).head(CONTRIBUTORS)
    return tuple(
        Contributor(_op_name(row["op"]), _int(row["allocated_bytes"]), tensor_detail(row))
        for _, row in live.iterrows()
    )


def _top_padding(profile: RecordSource, s: AllocatorRecord) -> tuple[Contributor, ...]:
    from traceparse.records.gate import padding_rows

    padded = padding_rows(profile.live_at_peak(allocator=s.allocator, host=s.host))
    out = []
    for _, row in padded.head(CONTRIBUTORS).iterrows():
        pad = int(row["padding_bytes"])
        detail = (
            f"asked {format_bytes(_int(row['requested_bytes']))}, "
            f"got {format_bytes(_int(row['allocated_bytes']))}"
        )
        out.append(Contributor(_op_name(row["op"]), int(pad), detail))
    return tuple(out)


def tensor_detail(row: Any) -> str:
    """``"float32 [4096,256] output"`` from an allocation row; parts that are NA left out."""
    parts = [row[c] for c in ("dtype", "shape", "region")]
    return " ".join(str(p) for p in parts if not _missing(p))


def _op_name(op: Any) -> str:
    return NO_OP if _missing(op) else str(op)


def _missing(value: Any) -> bool:
    from traceparse.output.units import is_missing

    return is_missing(value)


def _int(value: Any) -> int:
    return 0 if _missing(value) else int(value)


def _pct(fraction: float) -> str:
    return format_percent(fraction, digits=_digits(fraction))


def _digits(fraction: float) -> int:
    # 90% reads as "90%", 0.05% as "0.05%": enough digits to show the value.
    percent = abs(fraction) * 100
    if percent == round(percent):
        return 0
    return 1 if percent >= 1 else 2
