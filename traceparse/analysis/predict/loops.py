"""A recurrent loop's weight gradients in flight: how many a run holds at once varies.

Keras' recurrent layers on TensorFlow run their steps in ``tf.while_loop`` with
``parallel_iterations=32`` (keras/src/backend/tensorflow/rnn.py; ``tf.while_loop``'s
own default is 10, tensorflow/python/ops/while_loop.py). TF2 builds it as a
functional while (while_v2): the weights the body reads are loop invariants
(its external captures become loop variables, tensorflow/python/ops/while_v2.py),
so the gradient loop (``while_grad/body``) computes, in every iteration, a
gradient of each such weight, of the weight's own shape ([512,2048] for an
LSTM's recurrent kernel), and adds it to a running sum carried from iteration
to iteration. Only that sum is serial: up to ``parallel_iterations`` iterations
may compute their own weight gradient before the earlier ones are added, and
the executor decides which ready op runs next by its queue and by what each
kernel cost when it last ran (tensorflow/core/common_runtime/executor.cc,
``OpKernel::IsExpensive``), which differs run to run even one op at a time.

Measured (CPU, inter-op parallelism 1, three fresh processes each): an
Embedding+LSTM(512) at 192 held 32, 1 and 32 of its [512,2048] per-iteration
gradients at its peaks (224, 161.5 and 235 MiB); two stacked GRU(256) at 32
held 32, 32 and 1 of their [256,768] ones (34.2, 35.0 and 11.8 MiB). So a run
holds between one of each such gradient at a time and ``parallel_iterations``
of each, and the capture shows one draw of it. The same holds for the loop's
other per-iteration temporaries whose consumer waits (the GRU's run at 128 that
held one weight gradient at a time held 32 [128,768] ``StridedSliceGrad``
outputs at another moment). The bounds cover both ends: the low keeps one of
each per-iteration temporary live (``LoopTemps.excess``), the high
``parallel_iterations`` of each weight gradient while its loop runs
(``LoopTemps.gain``; the other temporaries at most as this run held them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceparse.analysis.liveness import STILL_LIVE
from traceparse.analysis.predict.batch import dims

# Keras' RNN layers on TensorFlow (keras/src/backend/tensorflow/rnn.py).
PARALLEL_ITERATIONS = 32
# An op of a while_v2 gradient loop's body, up to the body's own scope.
_GRAD_BODY = re.compile(r"^(.*?/while_grad/body/_\d+/)")


@dataclass
class LoopTemps:
    """The per-iteration temporaries of a capture's gradient loops.

    ``ops``: the ops whose temporaries matter (more than one live at some moment
    of the capture, or a weight's gradient); ``index``: each op's allocations
    (rows of the allocations table); ``loop``: each op's loop; ``weighty``:
    whether the op's is a weight's gradient; ``counts``: per op, how many of its
    allocations are live after each timeline row; ``spans``: per loop, a mask of
    the timeline rows while it runs (per step, its first allocation to its last
    weight gradient's free); ``parallel``: the iterations that may be in
    flight."""

    ops: list[str]
    index: list[np.ndarray]
    loop: np.ndarray
    weighty: np.ndarray
    counts: np.ndarray
    spans: np.ndarray
    parallel: int

    def _each(self, sizes: np.ndarray) -> np.ndarray:
        """Bytes of one allocation of each op at ``sizes`` (their largest)."""
        return np.array([float(sizes[i].max()) for i in self.index])

    def excess(self, sizes: np.ndarray) -> np.ndarray:
        """Per timeline row: the bytes of these temporaries live beyond one of each
        op, which a run computing one iteration at a time does not hold."""
        each = self._each(sizes)[:, None]
        return (np.maximum(self.counts - 1, 0) * each).sum(axis=0)

    def gain(self, sizes: np.ndarray) -> np.ndarray:
        """Per timeline row: what a run with ``parallel`` iterations' weight
        gradients of every such op of the running loop in flight holds beyond this
        one (0 outside the loops)."""
        each = self._each(sizes)[:, None]
        room = np.maximum(self.parallel - self.counts, 0) * each
        out = np.zeros(self.counts.shape[1])
        for loop in np.unique(self.loop[self.weighty]):
            mine = (self.loop == loop) & self.weighty
            out = np.maximum(out, np.where(self.spans[loop], room[mine].sum(axis=0), 0.0))
        return out

    def bytes_in_flight(self, sizes: np.ndarray) -> int:
        """The most the weight gradients can hold at once: ``parallel`` of each op
        of the loop that has the most."""
        each = self._each(sizes)
        loops = np.unique(self.loop[self.weighty])
        if not len(loops):
            return 0
        return round(
            max(each[(self.loop == k) & self.weighty].sum() for k in loops) * self.parallel
        )


def _counts(start: np.ndarray, end: np.ndarray, rows: int) -> np.ndarray:
    """How many of the allocations [start, end) are live after each timeline row."""
    change = np.zeros(rows + 1)
    np.add.at(change, start, 1.0)
    np.add.at(change, end, -1.0)
    return np.cumsum(change)[:rows]


def loop_temps(
    allocations: pd.DataFrame,
    ends: np.ndarray,
    mine: np.ndarray,
    weights: set[tuple[int, ...]],
    rows: int,
) -> LoopTemps | None:
    """The gradient loops' per-iteration temporaries among ``mine``'s allocations:
    made by an op of a ``while_grad/body`` scope and freed while that loop still
    runs in its step (not a list element it hands on), of the ops that held more
    than one at some moment or whose shape is a weight's (a weight's gradient,
    added to the running sum). None where there are none (no recurrent loop:
    the bounds are left as they are). ``rows``: the timeline's length."""
    ops = allocations["op"]
    if isinstance(ops.dtype, pd.CategoricalDtype):  # no loop body: each name read once
        named = ops.cat.categories.astype(str).str.contains("/while_grad/body/", regex=False)
        hits = np.append(np.asarray(named, dtype=bool), False)  # the last: no op
        if not (mine & hits[ops.cat.codes.to_numpy(dtype=np.int64)]).any():
            return None
    names_of = allocations["op"].astype(object).where(allocations["op"].notna(), "").astype(str)
    text = names_of.to_numpy(dtype=object)
    in_body = mine & names_of.str.contains("/while_grad/body/", regex=False).to_numpy(dtype=bool)
    if not in_body.any():
        return None
    start = allocations["alloc_event"].to_numpy(dtype=np.int64)
    steps = allocations["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    steps = np.where(np.isnan(steps), -1.0, steps)
    loop_name = names_of.str.extract(_GRAD_BODY, expand=False).fillna("").to_numpy(dtype=object)
    # Each loop's run in each step: its ops' first and last allocation.
    ran = pd.DataFrame({"loop": loop_name[in_body], "step": steps[in_body], "row": start[in_body]})
    span = ran.groupby(["loop", "step"])["row"].agg(["min", "max"])
    body = np.flatnonzero(in_body & (ends != STILL_LIVE))
    shapes = pd.Series(allocations["shape"].astype(object).to_numpy()[body]).astype(str)
    weighty_shapes = {k for k in shapes.unique() if dims(k) in weights}
    is_weighty = shapes.isin(weighty_shapes).to_numpy(dtype=bool)
    # A weight's gradient is added to the running sum, never handed on; another
    # temporary counts where it is freed while its loop still runs in its step
    # (the sum's last additions may come after the loop's last allocation).
    where = pd.MultiIndex.from_arrays([loop_name[body], steps[body]])
    summed = (
        pd.Series(ends[body][is_weighty])
        .groupby([loop_name[body][is_weighty], steps[body][is_weighty]])
        .max()
    )
    stop = np.maximum(
        span["max"].reindex(where).to_numpy(dtype=np.float64),
        summed.reindex(where).fillna(-1).to_numpy(dtype=np.float64),
    )
    keep = is_weighty | (ends[body] <= stop)
    body, is_weighty = body[keep], is_weighty[keep]
    if not len(body):
        return None
    ops, index, weighty, counts = [], [], [], []
    for name, at in pd.Series(np.arange(len(body))).groupby(text[body]).indices.items():
        idx = body[at]
        live = _counts(start[idx], ends[idx], rows)
        heavy = bool(is_weighty[at].any())
        if heavy or live.max() > 1:
            ops.append(str(name))
            index.append(idx)
            weighty.append(heavy)
            counts.append(live)
    if not ops:
        return None
    loops = sorted({str(loop_name[i[0]]) for i in index})
    loop_of = np.array([loops.index(str(loop_name[i[0]])) for i in index], dtype=np.int64)
    heavy_of = np.array(weighty, dtype=bool)
    spans = np.zeros((len(loops), rows), dtype=bool)
    for k, loop in enumerate(loops):
        # Per step: the loop's first allocation to its last weight gradient's free.
        firsts = span.loc[loop, "min"]
        grads = [index[j] for j in np.flatnonzero((loop_of == k) & heavy_of)]
        if not grads:
            continue
        g = np.concatenate(grads)
        ends_by_step = pd.Series(ends[g]).groupby(steps[g]).max()
        stops = np.maximum(span.loc[loop, "max"], ends_by_step.reindex(firsts.index).fillna(0))
        change = np.zeros(rows + 1)
        np.add.at(change, firsts.to_numpy(np.int64), 1.0)
        np.add.at(change, np.minimum(stops.to_numpy(np.int64) + 1, rows), -1.0)
        spans[k] = np.cumsum(change)[:rows] > 0
    stacked = np.vstack(counts)
    parallel = max(PARALLEL_ITERATIONS, int(stacked[heavy_of].max()) if heavy_of.any() else 0)
    return LoopTemps(ops, index, loop_of, heavy_of, stacked, spans, parallel)
