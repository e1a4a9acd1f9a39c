"""Charts for the HTML report, as inline SVG text.

matplotlib is imported inside the functions that draw (``import traceparse``
must stay light), and only through ``Figure`` with the Agg canvas: no pyplot,
no global backend switch, safe to call from any thread. Every label that comes
from the capture is drawn with ``parse_math=False`` (a ``$`` in an op name is
not mathtext) and matplotlib's SVG writer escapes it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from traceparse.output.cells import MAX_NOTE_WIDTH
from traceparse.output.cells import shorten as cut_middle
from traceparse.output.units import format_bytes, format_duration_ps
from traceparse.report.escape import html_text, one_line

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "attribution_svg",
    "bars_svg",
    "downsample_minmax",
    "prediction_svg",
    "timeline_svg",
]

# Points kept per allocator are about 4 x this; plenty for a 1000-pixel-wide chart.
TIMELINE_BUCKETS = 1200
# Steps get a "step n" label above the chart only when there are this few.
MAX_LABELLED_STEPS = 30

INK = "#1f2933"
MUTED = "#616e7c"
GRID = "#e4e7eb"
LINE = "#2563eb"
PEAK = "#dc2626"
CAPACITY = "#7c3aed"
STEP_SHADE = "#eef2f7"
PALETTE = ["#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#64748b", "#ec4899"]

_PATH_DATA = re.compile(r' d="([^"]*)"')
_DECIMALS = re.compile(r"(\.\d)\d+")
_BINARY = [("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4)]
_TIME = [("ns", 1e3), ("µs", 1e6), ("ms", 1e9), ("s", 1e12)]


def downsample_minmax(x: np.ndarray, y: np.ndarray, buckets: int = TIMELINE_BUCKETS) -> np.ndarray:
    """Indices of the points to draw: per x bucket, the first, last, lowest and highest.

    ``x`` must be sorted. Every local extreme that a pixel column could show
    survives, so the peak and the troughs are drawn at their true heights.
    Returns every index when there are few points.
    """
    n = len(x)
    if n <= 4 * buckets:
        return np.arange(n)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    span = x[-1] - x[0]
    if span <= 0:
        bucket = np.zeros(n, dtype=np.int64)
    else:  # (x - x[0]) / span * buckets, in place: millions of points
        scaled = x - x[0]
        scaled /= span
        scaled *= buckets
        bucket = scaled.astype(np.int64)
        del scaled
        np.minimum(bucket, buckets - 1, out=bucket)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], n] - 1
    if np.isnan(y).any():
        # Within each bucket: sort by (bucket, y) and take the first and last.
        order = np.lexsort((y, bucket))
        lowest, highest = order[starts], order[ends]
    else:
        # The same points without sorting millions: each bucket's extremes by
        # ``reduceat``, then the first row at its lowest and the last at its highest.
        del bucket
        of = np.repeat(np.arange(len(starts), dtype=np.int32), ends - starts + 1)
        at = np.flatnonzero(y == np.minimum.reduceat(y, starts)[of])
        lowest = at[np.r_[True, of[at][1:] != of[at][:-1]]]
        at = np.flatnonzero(y == np.maximum.reduceat(y, starts)[of])
        highest = at[np.r_[of[at][1:] != of[at][:-1], True]]
    return np.unique(np.concatenate([starts, ends, lowest, highest]))


def _unit(value: float, units: Sequence[tuple[str, float]]) -> tuple[str, float]:
    chosen = units[0]
    for unit in units:
        if abs(value) >= unit[1]:
            chosen = unit
    return chosen


@contextmanager
def _figure(width: float, height: float, salt: str) -> Iterator[tuple[Figure, Axes]]:
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with mpl.rc_context(
        {
            "svg.fonttype": "none",  # real text: selectable, small, styled by the page
            "svg.hashsalt": salt,  # deterministic and distinct ids per chart
            "font.family": "sans-serif",
            "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
            "font.size": 9,
            "axes.edgecolor": GRID,
            "axes.labelcolor": MUTED,
            "axes.titlesize": 10,
            "xtick.color": MUTED,
            "ytick.color": MUTED,
            "text.color": INK,
        }
    ):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        yield fig, ax


def _svg(fig: Figure, label: str) -> str:
    """The figure as an ``<svg>`` element for inlining: no XML prolog, responsive size."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, count=1, flags=re.S)
    # Path data to 0.1 pt (a fifth of a pixel at most): timelines shrink by half.
    # Only inside d="..." attributes, where no label text can be.
    text = _PATH_DATA.sub(lambda m: ' d="' + _DECIMALS.sub(r"\1", m.group(1)) + '"', text)
    # A function, not a template: the label comes from the capture and may hold "\\1".
    opening = f'<svg role="img" aria-label="{html_text(label)}" '
    return re.sub(
        r'<svg ([^>]*?)width="[^"]*" height="[^"]*"',
        lambda m: opening + m.group(1),
        text,
        count=1,
    )


def _shorten(name: str, limit: int = 56) -> str:
    """The end of a long op or scope name: it names the layer and the op (hover shows all)."""
    if len(name) <= limit:
        return name
    return "…" + name[-(limit - 1) :]


def _with_titles(svg: str, titles: dict[str, str]) -> str:
    """``<title>`` (a tooltip on hover) inside each group whose id is a key of ``titles``."""
    for gid, text in titles.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html_text(text)}</title>', 1)
    return svg


def _capacity_line(ax: Axes, capacity_bytes: int, scale: float) -> None:
    """The capacity as a dashed line across the plot, named at its left end."""
    ax.axhline(capacity_bytes / scale, color=CAPACITY, lw=1, ls="--")
    ax.text(
        0.005,
        capacity_bytes / scale,
        f"capacity {format_bytes(capacity_bytes)}",
        transform=ax.get_yaxis_transform(),
        va="bottom",
        fontsize=8,
        color=CAPACITY,
    )


def line_points(
    time_ps: np.ndarray, in_use_bytes: np.ndarray, start_bytes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The points of the in-use line: known values, from the capture start.

    An allocator whose first event comes late held ``start_bytes`` (its counter
    before that event) all along: the line starts there at time 0, not at zero.
    """
    t = np.asarray(time_ps, dtype=np.float64)
    y = np.asarray(in_use_bytes, dtype=np.float64)
    keep = ~np.isnan(y)
    if not keep.all():  # no copies of millions of points where none is missing
        t, y = t[keep], y[keep]
    if start_bytes is not None and len(t) and t[0] > 0:
        t = np.concatenate(([0.0], t))
        y = np.concatenate(([float(start_bytes)], y))
    return t, y


def timeline_svg(
    time_ps: np.ndarray,
    in_use_bytes: np.ndarray,
    *,
    peak_time_ps: int | None = None,
    peak_bytes: int | None = None,
    capacity_bytes: int | None = None,
    steps: Sequence[tuple[int, int, int]] = (),
    label: str = "memory in use over time",
    salt: str = "timeline",
    start_bytes: int | None = None,
    peak_step: str = "",
    failure: tuple[int, str] | None = None,
) -> str:
    """In-use bytes over time as a step line; the peak marked, steps shaded.

    ``steps`` are ``(step, start_ps, end_ps)``. Times are picoseconds from the
    capture start; axes are labelled in ms/s and KiB/MiB/GiB. ``start_bytes``
    is the counter before the first event (see ``line_points``). ``peak_step``
    ("step 2") is said in the peak's label, as a step's band can be too narrow
    to see; ``failure`` is (time_ps, label) of a failure, drawn as a line.
    """
    t, y = line_points(time_ps, in_use_bytes, start_bytes)
    keep_idx = downsample_minmax(t, y)
    t, y = t[keep_idx], y[keep_idx]

    top = max([float(y.max()) if len(y) else 0.0, float(peak_bytes or 0)])
    show_capacity = bool(capacity_bytes) and capacity_bytes <= 2 * max(top, 1)  # type: ignore[operator]
    if show_capacity:
        top = max(top, float(capacity_bytes))  # type: ignore[arg-type]
    y_unit, y_scale = _unit(top, _BINARY)
    ends = [float(e) for _, _, e in steps] + ([float(t[-1])] if len(t) else [1.0])
    t_unit, t_scale = _unit(max(ends), _TIME)
    span_ps = max(ends)

    with _figure(10, 3.4, salt) as (fig, ax):
        for i, (step, start, end) in enumerate(steps):
            shade = STEP_SHADE if i % 2 == 0 else "#f6f8fb"
            ax.axvspan(start / t_scale, end / t_scale, color=shade, lw=0)
            # Label a step only where its band is wide enough to hold the text.
            if len(steps) > MAX_LABELLED_STEPS or (end - start) < 0.045 * span_ps:
                continue
            ax.text(
                (start + end) / 2 / t_scale,
                1.0,
                f"step {step}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
                color=MUTED,
                clip_on=False,
            )
        if len(t):
            ax.plot(t / t_scale, y / y_scale, drawstyle="steps-post", color=LINE, lw=1.4)
            ax.fill_between(t / t_scale, y / y_scale, step="post", color=LINE, alpha=0.08, lw=0)
        if show_capacity:
            _capacity_line(ax, capacity_bytes, y_scale)  # type: ignore[arg-type]
        if peak_time_ps is not None and peak_bytes is not None:
            px, py = peak_time_ps / t_scale, peak_bytes / y_scale
            ax.plot([px], [py], "o", color=PEAK, ms=5, zorder=5)
            span = ax.get_xlim()
            right = (px - span[0]) > 0.7 * (span[1] - span[0])
            where = f", {peak_step}" if peak_step else ""
            ax.annotate(
                f"peak {format_bytes(peak_bytes)} at {format_duration_ps(peak_time_ps)}{where}",
                (px, py),
                xytext=(-8 if right else 8, 4),
                textcoords="offset points",
                ha="right" if right else "left",
                va="bottom",
                color=PEAK,
                fontsize=9,
                fontweight="bold",
            )
        if failure is not None:
            ax.axvline(failure[0] / t_scale, color=PEAK, lw=1, ls=":")
            ax.text(
                failure[0] / t_scale,
                0.5,
                f" {failure[1]} ",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                ha="right",
                va="center",
                fontsize=8,
                color=PEAK,
            )
        ax.set_ylim(0, top / y_scale * 1.12 if top else 1)
        ax.set_xlim(0, span_ps / t_scale * 1.01)
        ax.set_xlabel(f"time since capture start ({t_unit})")
        ax.set_ylabel(f"in use ({y_unit})")
        ax.grid(axis="y", color=GRID, lw=0.8)
        ax.set_axisbelow(True)
        return _svg(fig, label)


def label_bars(
    ax: Axes, positions: np.ndarray, values: np.ndarray, scale: float, *, headroom: float
) -> None:
    """Write each bar's bytes at its end and style the axes of a horizontal bar chart;
    ``headroom`` leaves room on the right for the longest label."""
    for pos, value in zip(positions, values, strict=True):
        ax.annotate(
            format_bytes(value),
            (value / scale, pos),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            ha="left",
            fontsize=8,
            color=INK,
        )
    ax.set_xlim(0, (values.max() / scale if len(values) else 1) * headroom)
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)
    ax.grid(axis="x", color=GRID, lw=0.8)
    ax.set_axisbelow(True)


def name_ticks(
    ax: Axes,
    positions: np.ndarray,
    names: Sequence[str],
    salt: str,
    shorten: Callable[[str], str] = _shorten,
) -> dict[str, str]:
    """Y-axis labels cut by ``shorten`` to fit; returns each label's group id ->
    the full name, for ``_with_titles`` to make it the label's hover title."""
    ax.set_yticks(
        positions,
        labels=[shorten(one_line(name)) for name in names],
        parse_math=False,
        fontfamily="DejaVu Sans Mono",
        fontsize=8,
    )
    titles = {}
    for i, (tick, name) in enumerate(zip(ax.get_yticklabels(), names, strict=True)):
        tick.set_gid(f"{salt}-label-{i}")
        # The whole name on hover, up to a bound: a crafted one can be megabytes.
        titles[f"{salt}-label-{i}"] = cut_middle(one_line(name), MAX_NOTE_WIDTH)
    return titles


def bars_svg(
    labels: Sequence[str],
    values: Sequence[int],
    *,
    label: str,
    xlabel: str = "bytes live at the peak",
    salt: str = "bars",
) -> str:
    """Horizontal bars, largest on top, each with its value in human units."""
    n = max(len(labels), 1)
    with _figure(10, 0.7 + 0.28 * n, salt) as (fig, ax):
        vals = np.asarray(values, dtype=np.float64)
        unit, scale = _unit(float(vals.max()) if len(vals) else 0.0, _BINARY)
        positions = np.arange(len(labels))[::-1]
        ax.barh(positions, vals / scale, color=LINE, height=0.68)
        titles = name_ticks(ax, positions, labels, salt)
        label_bars(ax, positions, vals, scale, headroom=1.15)
        ax.set_xlabel(f"{xlabel} ({unit})")
        return _with_titles(_svg(fig, label), titles)


def attribution_svg(
    parts: Sequence[tuple[str, int]], *, label: str, salt: str = "attribution"
) -> str:
    """One stacked bar: what the bytes in use at the peak are made of."""
    shown = [(name, value) for name, value in parts if value > 0]
    total = float(sum(v for _, v in shown)) or 1.0
    with _figure(10, 1.05, salt) as (fig, ax):
        left = 0.0
        for i, (name, value) in enumerate(shown):
            share = value / total
            ax.barh(
                [0],
                [share],
                left=left,
                color=PALETTE[i % len(PALETTE)],
                height=0.8,
                label=f"{name}: {format_bytes(value)} ({share:.0%})",
            )
            if share > 0.08:
                ax.text(
                    left + share / 2,
                    0,
                    f"{share:.0%}",
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=9,
                    fontweight="bold",
                )
            left += share
        if shown:
            legend = ax.legend(
                loc="upper center",
                bbox_to_anchor=(0.5, 0.02),
                ncols=min(len(shown), 3),
                frameon=False,
                fontsize=8,
            )
            for text in legend.get_texts():
                text.set_parse_math(False)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.4, 0.4)
        ax.axis("off")
        return _svg(fig, label)


# --- Prediction at other batch sizes (issue 40; a separate section of the report,
# called by report/predict.py; the lead may re-wire it into the per-allocator record).
def prediction_svg(
    batch_sizes: Sequence[int],
    peak_bytes: Sequence[int],
    low_bytes: Sequence[int],
    high_bytes: Sequence[int],
    *,
    capacity_bytes: int | None = None,
    captured: tuple[int, int] | None = None,
    largest: tuple[int, int] | None = None,
    label: str = "predicted peak against batch size",
    salt: str = "prediction",
) -> str:
    """The predicted peak against the batch size (log scale), its bounds shaded,
    the capacity as a line, the captured batch and the largest that fits marked."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    x = np.asarray(batch_sizes, dtype=np.float64)
    y = np.asarray(peak_bytes, dtype=np.float64)
    lo = np.asarray(low_bytes, dtype=np.float64)
    hi = np.asarray(high_bytes, dtype=np.float64)
    # The axis follows the prediction and the capacity; a high bound far above
    # them is cut at the top rather than flattening the line.
    peak = float(y.max()) if len(y) else 0.0
    show_capacity = bool(capacity_bytes) and capacity_bytes <= 3 * max(peak, 1)  # type: ignore[operator]
    shown = max(peak, float(capacity_bytes) if show_capacity else 0.0)  # type: ignore[arg-type]
    top = max(min(shown * 1.6, float(hi.max()) if len(hi) else 0.0), shown) or 1.0
    unit, scale = _unit(top, _BINARY)
    with _figure(10, 3.4, salt) as (fig, ax):
        if len(x):
            ax.fill_between(x, lo / scale, hi / scale, color=LINE, alpha=0.12, lw=0, label="bounds")
            ax.plot(x, y / scale, color=LINE, lw=1.6, marker="o", ms=3, label="predicted peak")
        if show_capacity:
            _capacity_line(ax, capacity_bytes, scale)  # type: ignore[arg-type]
        if captured is not None:
            ax.plot([captured[0]], [captured[1] / scale], "s", color=INK, ms=5, zorder=5)
            ax.annotate(
                f"captured: batch {captured[0]}, {format_bytes(captured[1])}",
                (captured[0], captured[1] / scale),
                xytext=(6, -12),
                textcoords="offset points",
                fontsize=8,
                color=INK,
            )
        if largest is not None:
            ax.plot([largest[0]], [largest[1] / scale], "o", color=PEAK, ms=6, zorder=6)
            ax.annotate(
                f"largest that fits: {largest[0]} ({format_bytes(largest[1])})",
                (largest[0], largest[1] / scale),
                xytext=(-8, 6),
                textcoords="offset points",
                ha="right",
                fontsize=9,
                color=PEAK,
                fontweight="bold",
            )
        ax.set_xscale("log", base=2)
        # Batch sizes as plain integers, at most a dozen: the default labels are
        # mathtext (2^n), whose parser takes most of the drawing's time.
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(0, top / scale * 1.12 if top else 1)
        ax.set_xlabel("batch size")
        ax.set_ylabel(f"peak in use ({unit})")
        ax.grid(axis="y", color=GRID, lw=0.8)
        ax.set_axisbelow(True)
        # Clear of the capacity's label (top left) and of the curve (it rises to the right).
        legend = ax.legend(loc="center left", frameon=False, fontsize=8)
        for text in legend.get_texts():
            text.set_parse_math(False)
        return _svg(fig, label)
