"""Read a batch record (``<host>.batch.json``) without TensorFlow.

Every capture traceparse makes writes beside it the batch size of the steps it
saw (``traceparse.capture.batch`` writes it), so that a prediction at another
batch size starts from a recorded fact instead of one read off the shapes::

    {"format": "traceparse.batch", "version": 1, "tensorflow": "2.21.0",
     "started_ns": .., "stopped_ns": ..,      # wall clock around the capture
     "batch_size": 64,                        # the capture's batch, or null
     "how": "given" | "keras" | "function",   # where it was read (below)
     "steps": [[3, 64], [4, 64], [5, 16]]}    # [step, batch size] per marked step

``how``: ``given`` is what the user passed (``profile(batch_size=)``,
``cap.step(n, batch_size=)``); ``keras`` is the batch Keras' data adapter fed
``fit``'s steps; ``function`` the leading dimension of the tensors an eagerly
called ``tf.function`` received. The record is an input like any other: every
field is checked, and one that cannot be used is one diagnostic while the
capture loads without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from traceparse.decode.limits import JsonBudget
from traceparse.decode.variables import quote

FORMAT = "traceparse.batch"
VERSION = 1
HOWS = ("given", "keras", "function")
# What each way means in a sentence (a prediction's batch evidence).
HOW_WORDS = {
    "given": "given to the capture (batch_size=)",
    "keras": "the batches Keras fed fit's steps",
    "function": "the inputs of the tf.function the steps called",
}
# A capture marks a few to a few thousand steps; the record keeps at most this many.
MAX_STEPS = 100_000
# The record's file: a few numbers per step.
MAX_BATCH_BYTES = 4 * 2**20
# A batch larger than this is no batch (int32 dimensions in TensorFlow's shapes).
MAX_BATCH_SIZE = 2**31 - 1
_MAX_NS = 2**63 - 1
# What parsing may build, checked on the text before it is parsed
# (``decode.limits.JsonBudget``): the document, the steps' list and a pair per
# step; two values per pair and a dozen fields beside them.
MAX_CONTAINERS = MAX_STEPS + 16
MAX_VALUES = 4 * MAX_STEPS + 1024


class BatchProblem(ValueError):
    """The file is not a usable batch record; the message says why."""


def batch_budget() -> JsonBudget:
    """The counter ``read_bytes`` runs over a batch record's text before it is parsed."""
    return JsonBudget("batch record", MAX_CONTAINERS, MAX_VALUES, BatchProblem)


@dataclass(frozen=True)
class BatchRecord:
    """The batch a capture's steps saw, as read and checked."""

    path: str
    batch_size: int | None
    how: str | None
    steps: tuple[tuple[int, int], ...]
    started_ns: int | None
    stopped_ns: int | None
    tensorflow: str | None = None

    @property
    def evidence(self) -> str:
        """Where the batch came from, in a sentence's words."""
        way = HOW_WORDS.get(self.how or "", "the capture's steps")
        return f"recorded by the capture: {way}"


def _count(value: object, what: str, limit: int, *, positive: bool = False) -> int | None:
    if value is None:
        return None
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < (1 if positive else 0)
        or value > limit
    ):
        kind = "a positive count" if positive else "a count"
        raise BatchProblem(f"{what} is {quote(value)}, not {kind} up to {limit:,}")
    return value


def decode_batch(data: bytes, path: str) -> BatchRecord:
    """Parse the file's bytes; ``BatchProblem`` when they are not a batch record.

    The text's containers and values are counted before it is parsed (the
    reader counts them while it reads, ``batch_budget``)."""
    batch_budget()(data)
    try:
        document = json.loads(data)
    except RecursionError as exc:
        raise BatchProblem("nested too deeply to be a batch record") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BatchProblem(f"not JSON ({quote(str(exc), 80)})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BatchProblem(f'its "format" is not "{FORMAT}"')
    if document.get("version") != VERSION:
        raise BatchProblem(
            f"version {quote(document.get('version'))}; this traceparse reads version {VERSION}"
        )
    batch = _count(document.get("batch_size"), "batch_size", MAX_BATCH_SIZE, positive=True)
    how = document.get("how")
    if how is not None and how not in HOWS:
        raise BatchProblem(f'"how" is {quote(how)}, not one of {", ".join(HOWS)}')
    if batch is not None and how is None:
        raise BatchProblem('it gives a batch_size but not "how" it was read')
    steps = document.get("steps", [])
    if not isinstance(steps, list):
        raise BatchProblem(f'"steps" is {quote(steps)}, not a list')
    if len(steps) > MAX_STEPS:
        raise BatchProblem(f'"steps" has {len(steps):,} entries, more than the {MAX_STEPS:,} read')
    pairs = []
    for item in steps:
        if not isinstance(item, list) or len(item) != 2:
            raise BatchProblem(f"a step is {quote(item)}, not [step, batch size]")
        step = _count(item[0], "a step number", _MAX_NS)
        size = _count(item[1], "a step's batch size", MAX_BATCH_SIZE, positive=True)
        if step is None or size is None:
            raise BatchProblem(f"a step is {quote(item)}, not [step, batch size]")
        pairs.append((step, size))
    started = _count(document.get("started_ns"), "started_ns", _MAX_NS)
    stopped = _count(document.get("stopped_ns"), "stopped_ns", _MAX_NS)
    version = document.get("tensorflow")
    # A version is short printable text; anything else (control or bidi characters,
    # a lone surrogate no UTF-8 writer can encode) is dropped, not shown.
    if not (isinstance(version, str) and len(version) <= 100 and version.isprintable()):
        version = None
    return BatchRecord(
        path=path,
        batch_size=batch,
        how=how if batch is not None else None,
        steps=tuple(pairs),
        started_ns=started,
        stopped_ns=stopped,
        tensorflow=version,
    )
