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
of each, and the capture shows one draw of it: the bounds cover both ends
(``LoopTemps.excess`` for the low, ``LoopTemps.gain`` for the high).
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
    """The per-iteration weight gradients of a capture's gradient loops.

    ``index``: each op's allocations (rows of the allocations table), one array
    per op; ``loop``: each op's loop; ``counts``: per op, how many of its
    allocations are live after each timeline row; ``spans``: per loop, a mask
    of the timeline rows while it runs (from its first allocation to its last
    gradient's free, per step); ``parallel``: the iterations that may be in
    flight."""

    ops: list[str]
    index: list[np.ndarray]
    loop: np.ndarray
    counts: np.ndarray
    spans: np.ndarray
    parallel: int

    def _each(self, sizes: np.ndarray) -> np.ndarray:
        """Bytes of one allocation of each op at ``sizes`` (their largest)."""
        return np.array([float(sizes[i].max()) for i in self.index])

    def excess(self, sizes: np.ndarray) -> np.ndarray:
        """Per timeline row: the bytes of these gradients live beyond one of each
        op, which a run computing one iteration's at a time does not hold."""
        each = self._each(sizes)[:, None]
        return (np.maximum(self.counts - 1, 0) * each).sum(axis=0)

    def gain(self, sizes: np.ndarray) -> np.ndarray:
        """Per timeline row: what a run with ``parallel`` iterations' gradients of
        every op of the running loop in flight holds beyond this one (0 outside
        the loops)."""
        each = self._each(sizes)[:, None]
        room = (self.parallel - self.counts) * each
        out = np.zeros(self.counts.shape[1])
        for loop in np.unique(self.loop):
            mine = self.loop == loop
            out = np.maximum(out, np.where(self.spans[loop], room[mine].sum(axis=0), 0.0))
        return out

    def bytes_in_flight(self, sizes: np.ndarray) -> int:
        """The most these gradients can hold at once: ``parallel`` of each op of
        the largest loop."""
        each = self._each(sizes)
        return round(max(each[self.loop == k].sum() for k in np.unique(self.loop)) * self.parallel)


def loop_temps(
    allocations: pd.DataFrame,
    ends: np.ndarray,
    mine: np.ndarray,
    weights: set[tuple[int, ...]],
    rows: int,
) -> LoopTemps | None:
    """The gradient loops' per-iteration weight gradients among ``mine``'s
    allocations: made by an op of a ``while_grad/body`` scope, of a weight's
    shape, freed during the capture (added to the running sum). None where
    there are none (no recurrent loop: the bounds are left as they are).
    ``rows``: the timeline's length."""
    names_of = allocations["op"].astype(object).where(allocations["op"].notna(), "").astype(str)
    text = names_of.to_numpy(dtype=object)
    in_body = mine & names_of.str.contains("/while_grad/body/", regex=False).to_numpy(dtype=bool)
    if not in_body.any():
        return None
    shapes = allocations["shape"].astype(object).to_numpy()
    candidates = np.flatnonzero(in_body & (ends != STILL_LIVE))
    kinds = pd.Series(shapes[candidates]).astype(str)
    weighty = {k for k in kinds.unique() if dims(k) in weights}
    chosen = candidates[kinds.isin(weighty).to_numpy(dtype=bool)].astype(np.int64)
    if not len(chosen):
        return None
    start = allocations["alloc_event"].to_numpy(dtype=np.int64)
    names = sorted({str(text[i]) for i in chosen})
    prefix = {n: _GRAD_BODY.match(n).group(1) for n in names}  # type: ignore[union-attr]
    loops = sorted(set(prefix.values()))
    index = [chosen[text[chosen] == n] for n in names]
    counts = np.zeros((len(names), rows))
    for k, idx in enumerate(index):
        change = np.zeros(rows + 1)
        np.add.at(change, start[idx], 1.0)
        np.add.at(change, ends[idx], -1.0)
        counts[k] = np.cumsum(change)[:rows]
    steps = allocations["step"].to_numpy(dtype=np.float64, na_value=np.nan)
    spans = np.zeros((len(loops), rows), dtype=bool)
    for k, loop in enumerate(loops):
        # Each step's run of the loop: its ops' first allocation to its gradients' last free.
        ran = mine & names_of.str.startswith(loop).to_numpy(dtype=bool)
        grads = np.concatenate([index[j] for j, n in enumerate(names) if prefix[n] == loop])
        frame = pd.DataFrame(
            {
                "step": np.concatenate([steps[ran], steps[grads]]),
                "row": np.concatenate([start[ran], ends[grads]]),
            }
        ).fillna({"step": -1.0})
        span = frame.groupby("step")["row"].agg(["min", "max"])
        change = np.zeros(rows + 1)
        np.add.at(change, span["min"].to_numpy(np.int64), 1.0)
        np.add.at(change, np.minimum(span["max"].to_numpy(np.int64) + 1, rows), -1.0)
        spans[k] = np.cumsum(change)[:rows] > 0
    loop_of = np.array([loops.index(prefix[n]) for n in names], dtype=np.int64)
    parallel = max(PARALLEL_ITERATIONS, int(counts.max()))
    return LoopTemps(names, index, loop_of, counts, spans, parallel)
