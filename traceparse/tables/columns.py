"""Every column of every public table, declared once: its name, dtype and meaning.

A column name means one thing and has one dtype in every table it is in:
bytes are nullable ``Int64`` (NA: the capture did not say), times in
picoseconds ``int64`` (``Int64`` where a time can be unknown), repeated strings
categoricals. Which columns of a table may hold NA is the table's declaration
(``contracts.declare``); ``docs/columns.md`` is generated from both
(``python -m traceparse.tables.contracts``), and a test keeps it so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["CATEGORY", "COLUMNS", "DISPLAYS", "HEADLINE", "NAME", "PLAIN", "Column"]

CATEGORY = "category"

# How a person reads a column: bytes in KiB/MiB/GiB (signed when a change),
# moments and lengths of time, a share, a count, a plain number, an address;
# or words: ``name`` (long, hierarchical: ops, scopes, layers, shown as code),
# ``ident`` (short identifiers: dtypes, shapes) and ``text``.
DISPLAYS = (
    *("bytes", "signed_bytes", "time", "duration", "percent", "count", "number", "address"),
    *("name", "ident", "text"),
)
# Priorities when a table is too wide for its terminal: the lowest go first,
# the name and the byte column that answers the table's question last.
PLAIN, HEADLINE, NAME = 1, 2, 3


@dataclass(frozen=True)
class Column:
    """One column: ``name``, its pandas ``dtype`` and a one-line ``meaning``; and how
    it is presented: ``display`` (one of ``DISPLAYS``), the ``header`` reports
    give it, whether a terminal table ``shown`` it by default, its ``priority``
    when space is short, and the column it is a part of (``part_of``: the
    parts of a row sum to that column)."""

    name: str
    dtype: str
    meaning: str
    display: str = "text"
    header: str = ""
    shown: bool = True
    priority: int = PLAIN
    part_of: str | None = None

    @property
    def title(self) -> str:
        """The header a report gives the column: declared, else its name in words."""
        if self.header:
            return self.header
        words = self.name.removesuffix("_bytes").removesuffix("_ps").replace("_", " ")
        return words[:1].upper() + words[1:]


_DECLARED = [
    Column("host", CATEGORY, "the host the capture is from (its file name without .xplane.pb)"),
    Column(
        "allocator", CATEGORY, "the allocator that handed out the memory, e.g. GPU_0_bfc or mklcpu"
    ),
    Column("address", "Int64", "the allocation's address; NA when the event did not record one"),
    Column("op", CATEGORY, "the TensorFlow op that asked for the memory (its name as recorded)"),
    Column("op_type", CATEGORY, "the op's type, e.g. MatMul"),
    Column(
        "region", CATEGORY, "the allocation's region type as TensorFlow recorded it, e.g. output"
    ),
    Column("dtype", CATEGORY, "the tensor's element type, e.g. float32"),
    Column("shape", CATEGORY, "the tensor's shape as recorded, e.g. [32,256]"),
    Column("num_elements", "Int64", "elements in the shape; NA when the shape is unknown"),
    Column(
        "estimated_bytes",
        "Int64",
        "shape x dtype size (the estimate); NA when the shape or dtype is unknown",
    ),
    Column("requested_bytes", "Int64", "what the op asked the allocator for"),
    Column(
        "allocated_bytes",
        "Int64",
        "what the allocator handed out (the request rounded up to its chunk)",
    ),
    Column(
        "padding_bytes", "Int64", "allocated_bytes minus requested_bytes: the allocator's rounding"
    ),
    Column(
        "estimate_status",
        CATEGORY,
        "the request against the estimate: match, over, under or unknown",
    ),
    Column(
        "alloc_ps", "int64", "when the allocation was made, picoseconds from the capture's start"
    ),
    Column("free_ps", "Int64", "when it was freed; NA while still live at the end of the capture"),
    Column("lifetime_ps", "Int64", "free_ps minus alloc_ps; NA while still live"),
    Column("step", "Int64", "the marked step the allocation was made in; NA outside every step"),
    Column("step_id", "Int64", "the step id TensorFlow recorded with the event; NA when none"),
    Column("alloc_event", "int64", "the row of the timeline where it was allocated"),
    Column("free_event", "Int64", "the row of the timeline where it was freed; NA while live"),
    Column(
        "xla_program",
        CATEGORY,
        "the XLA program whose buffer this allocation is; NA for other allocations",
    ),
    Column(
        "xla_allocation_index",
        "Int64",
        "the buffer's allocation index in that XLA program; NA for other allocations",
    ),
    Column("time_ps", "int64", "when the event happened, picoseconds from the capture's start"),
    Column("kind", CATEGORY, "what the event was: alloc or free"),
    Column("in_use_bytes", "Int64", "bytes in use after the event: reserved plus allocated"),
    Column("heap_bytes", "Int64", "the allocator's counter of allocated bytes after the event"),
    Column("reserved_bytes", "Int64", "the allocator's bytes_reserved after the event"),
    Column(
        "available_bytes",
        "Int64",
        "what the allocator could still hand out; NA when it did not say",
    ),
    Column(
        "fragmentation",
        "Float64",
        "the allocator's fragmentation after the event (0 to 1); NA when unknown",
    ),
    Column(
        "delta_bytes", "Int64", "how much the event changed the bytes in use (negative for a free)"
    ),
    Column("allocation_bytes", "Int64", "the size of the allocation or free the event is about"),
    Column(
        "peak_bytes_in_use", "Int64", "the allocator's own peak counter as recorded with the event"
    ),
    Column(
        "name",
        CATEGORY,
        "the name of the step marker (the traced event), or of the tensor or variable",
    ),
    Column("start_ps", "int64", "when the step began, picoseconds from the capture's start"),
    Column("end_ps", "int64", "when the step ended, picoseconds from the capture's start"),
    Column(
        "layer", CATEGORY, "the Keras layer the bytes belong to (from op names and the inventory)"
    ),
    Column("activation_bytes", "Int64", "bytes at the peak held by the layer's forward outputs"),
    Column("gradient_bytes", "Int64", "bytes at the peak held by the layer's gradients"),
    Column("weight_bytes", "Int64", "bytes at the peak of the layer's weights"),
    Column(
        "optimizer_state_bytes",
        "Int64",
        "bytes at the peak of the optimizer's variables kept for the layer's weights "
        "(slots such as Adam's m and v): kept between steps, they scale with the parameters",
    ),
    Column(
        "optimizer_update_bytes",
        "Int64",
        "bytes at the peak of the optimizer's temporaries updating the layer's weights: "
        "alive only during the step",
    ),
    Column("other_bytes", "Int64", "bytes at the peak of the layer that are none of the above"),
    Column(
        "unknown_bytes",
        "Int64",
        "bytes at the peak of the layer whose role the capture does not say",
    ),
    Column("live_at_peak_bytes", "Int64", "bytes live at the peak"),
    Column("live_tensors", "int64", "how many tensors of the layer are live at the peak"),
    Column(
        "largest_tensor",
        CATEGORY,
        "the layer's largest live tensor at the peak (its op); NA when none",
    ),
    Column("largest_shape", CATEGORY, "that tensor's shape; NA when none or unknown"),
    Column("largest_bytes", "Int64", "that tensor's bytes; NA when none"),
    Column(
        "replica", "Int64", "the replica (tower) the layer's ops ran on; NA when not replicated"
    ),
    Column("device", CATEGORY, "the device the variable lives on, as TensorFlow names it"),
    Column(
        "path",
        CATEGORY,
        "the variable's path in its model, e.g. dense/kernel; in layers(depth=N), the layer "
        "and the layers nested in it, e.g. backbone/block/block_norm",
    ),
    Column(
        "role",
        CATEGORY,
        "in variables: weight, optimizer (its state) or other, as recorded; in breakdown: "
        "weight, optimizer_state, optimizer_update, activation, gradient, other or unknown",
    ),
    Column("belongs_to", CATEGORY, "for an optimizer slot, the path of the weight it is kept for"),
    Column("model", CATEGORY, "the Keras model the variable belongs to"),
    Column("at_start", "bool", "alive when the profiler started (so allocated before the capture)"),
    Column("at_stop", "bool", "alive when the profiler stopped"),
    Column("program", CATEGORY, "the XLA program (its name as TensorFlow runs it)"),
    Column("module", "object", "the HLO module's name"),
    Column("function", "object", "the tf.function the program was compiled from, when known"),
    Column("instructions", "int64", "instructions in the program's HLO"),
    Column("temp_bytes", "Int64", "the program's temporary buffer (one slab per run)"),
    Column("output_bytes", "Int64", "bytes of the program's outputs"),
    Column("parameter_bytes", "Int64", "bytes of the program's entry parameters"),
    Column("constant_bytes", "Int64", "bytes of the program's constants"),
    Column("thread_local_bytes", "Int64", "bytes of the program's thread-local buffers"),
    Column("runs", "int64", "how many times the program ran during the capture"),
    Column("allocation_index", "int64", "the buffer's index in the program's buffer assignment"),
    Column(
        "allocation_kind",
        CATEGORY,
        "what the buffer holds, e.g. parameter, output, temp or constant",
    ),
    Column(
        "parameter_number", "Int64", "the entry parameter the buffer holds; NA for other buffers"
    ),
    Column("offset", "int64", "where the value starts inside its buffer, in bytes"),
    Column("size_bytes", "Int64", "the size of the buffer or value"),
    Column("instruction", "object", "the HLO instruction that defines the value"),
    Column("opcode", CATEGORY, "that instruction's opcode"),
    Column("tf_op", "object", "the TensorFlow op the instruction came from, when the HLO says"),
    Column("tf_op_type", "object", "that op's type"),
    Column(
        "source",
        CATEGORY,
        "the user's Python frame that made it (file:line), where the capture has frames",
    ),
    Column("logical_buffer", "int64", "the logical buffer id in the buffer assignment"),
    Column("instruction_id", "Int64", "the defining instruction's id; NA when not given"),
    Column("updated", "bool", "the program writes the parameter back in place (maybe_live_out)"),
    Column("read_by", "object", "the TensorFlow ops that read the parameter, comma-separated"),
    Column("ran", "bool", "the program ran during the capture"),
    Column("counted", "bool", "the parameter's bytes count in xla_parameter_bytes"),
    Column("reason", CATEGORY, "why a parameter is not counted"),
    Column(
        "shape_explained_bytes",
        "Int64",
        "what the live tensors' shape x dtype accounts for (capped at the request)",
    ),
    Column(
        "xla_buffer_bytes", "Int64", "bytes at the peak in XLA buffers whose values the HLO names"
    ),
    Column(
        "xla_slack_bytes", "Int64", "bytes of XLA temp slabs at the peak that no live value uses"
    ),
    Column("shape_unknown_bytes", "Int64", "what TensorFlow asked for where it recorded no shape"),
    Column(
        "unexplained_request_bytes",
        "Int64",
        "the rest of what TensorFlow asked for, beyond the shapes",
    ),
    Column(
        "variable_bytes",
        "Int64",
        "the bytes allocated before the capture that the variable inventory names",
    ),
    Column(
        "xla_parameter_bytes",
        "Int64",
        "without an inventory: the bytes before the capture that XLA entry parameters account for",
    ),
    Column(
        "before_capture_bytes",
        "Int64",
        "bytes allocated before the capture and still held, owner unknown",
    ),
    Column("live_allocations", "int64", "how many allocations are live at the peak"),
    Column(
        "capacity_bytes",
        "Int64",
        "the allocator's capacity (in use plus available); NA when unknown",
    ),
    Column("event", "int64", "the timeline row of the peak (or of the peak instant)"),
    Column(
        "instant",
        "int64",
        "which of the allocator's visits within 1% of its peak, 0, 1, ... in time order",
    ),
    Column(
        "peak_events", "int64", "how many events reach the peak (the figures are the last one's)"
    ),
    Column(
        "lifetime_peak_bytes",
        "Int64",
        "the allocator's own peak since it started; NA when not recorded",
    ),
    Column("events", "int64", "how many events the allocator has in the capture"),
    Column("in_peak_step", "bool", "the allocation was made in the step that holds the peak"),
    Column("duration_ps", "int64", "end_ps minus start_ps"),
    Column("allocations", "int64", "how many allocations were made"),
    Column("frees", "int64", "how many frees there were"),
    Column("freed_bytes", "Int64", "bytes freed"),
    Column("peak_in_use_bytes", "Int64", "the highest bytes in use during the step"),
    Column("peak_time_ps", "int64", "when the step's peak was reached"),
    Column("in_use_start_bytes", "Int64", "bytes in use when the step began"),
    Column("in_use_end_bytes", "Int64", "bytes in use when the step ended"),
    Column("growth_bytes", "Int64", "in_use_end_bytes minus in_use_start_bytes"),
    Column("retained_bytes", "Int64", "bytes allocated in the step and still live at its end"),
    Column("judged", "bool", "the step counts for the leak check"),
    Column("count", "int64", "how many allocations"),
    Column("bytes", "Int64", "their bytes"),
    Column("steps", "int64", "how many steps"),
    Column("first_alloc_ps", "int64", "the first allocation's time"),
    Column("last_alloc_ps", "int64", "the last allocation's time"),
    Column("verdict", CATEGORY, "the leak check's verdict: growing, stable or too few steps"),
    Column("judged_steps", "int64", "how many steps the leak check judged"),
    Column("grew_steps", "int64", "how many of them grew"),
    Column("first_step", "Int64", "the first judged step"),
    Column("last_step", "Int64", "the last judged step"),
    Column("growth_bytes_per_step", "Float64", "the fitted growth per step; NA when not judged"),
    Column("total_growth_bytes", "Int64", "growth from the first judged step to the last"),
    Column("suspect_count", "int64", "how many allocations are suspected of leaking"),
    Column("suspect_bytes", "Int64", "their bytes"),
    Column("top_suspect_op", "object", "the op holding the most suspect bytes; None when none"),
    Column("top_suspect_bytes", "Int64", "the bytes it holds"),
    Column(
        "unestimated", "int64", "how many of the op's allocations have no shape x dtype estimate"
    ),
    Column("live_at_peak", "int64", "how many allocations are live at the peak"),
    Column("live_at_end", "int64", "how many allocations are live at the end of the capture"),
    Column("live_at_end_bytes", "Int64", "bytes live at the end of the capture"),
    Column(
        "mean_lifetime_ps", "Int64", "the mean lifetime of the freed allocations, whole picoseconds"
    ),
    Column(
        "compute_count",
        "Int64",
        "how many times the op computed; NA when the capture has no op events",
    ),
    Column(
        "compute_ps", "Int64", "the op's total compute time; NA when the capture has no op events"
    ),
    Column("scope", CATEGORY, "the name scope (the op name's first parts)"),
    Column("ops", "int64", "how many ops"),
    Column(
        "traced",
        "bool",
        "the allocator records the variable's buffer (False: in no counter of the capture)",
    ),
    Column(
        "named_by",
        CATEGORY,
        "how tf_op was found: hlo metadata, fused/copied instruction or consumer",
    ),
    Column(
        "holder", CATEGORY, "what holds the bytes: allocation, xla_buffer, padding, variable, ..."
    ),
    Column("part", CATEGORY, "the attribution column the row's bytes belong to"),
    Column("item", "int64", "the live thing the row is part of (rows of one tensor share it)"),
    Column(
        "allocation", "Int64", "the row in Profile.allocations; NA for bytes no allocation holds"
    ),
    Column("xla_buffer", "object", "the HLO value or buffer the row stands for; NA for others"),
    Column("variable", "object", "the inventoried variable the row stands for; NA for others"),
    # Source lines (docs/sources.md).
    Column(
        "stack",
        "Int64",
        "the recorded Python stack that made it (Profile.stacks); NA where none was recorded",
    ),
    Column("depth", "int64", "the frame's place in its stack, 0 for the outermost"),
    Column("frame", "object", "one Python frame as path:line function"),
    Column("user", "bool", "the frame is in the program's own code (not a library's)"),
    Column("layers", "object", "the layers whose bytes it holds at the peak, largest first"),
    Column("op_names", "object", "the ops whose bytes it holds, largest first"),
]

# -- roles ------------------------------------------------------------------------

# A layer's bytes at the peak by role (``analysis.naming``'s roles), one column a
# role, in the order every table, chart and report shows them.
ROLE_BYTE_COLUMNS = (
    "activation_bytes",
    "gradient_bytes",
    "weight_bytes",
    "optimizer_state_bytes",
    "optimizer_update_bytes",
    "other_bytes",
    "unknown_bytes",
)

# -- presentation ---------------------------------------------------------------

# Each column's display, by kind. Every declared column has one (checked below).
_DISPLAY: dict[str, tuple[str, ...]] = {
    "bytes": (
        *("estimated_bytes", "requested_bytes", "allocated_bytes", "padding_bytes"),
        *("in_use_bytes", "heap_bytes", "reserved_bytes", "available_bytes"),
        *("allocation_bytes", "peak_bytes_in_use", *ROLE_BYTE_COLUMNS, "live_at_peak_bytes"),
        *("largest_bytes", "temp_bytes", "output_bytes", "parameter_bytes", "constant_bytes"),
        *("thread_local_bytes", "size_bytes", "shape_explained_bytes", "xla_buffer_bytes"),
        *("xla_slack_bytes", "shape_unknown_bytes", "unexplained_request_bytes"),
        *("variable_bytes", "xla_parameter_bytes", "before_capture_bytes", "capacity_bytes"),
        *("lifetime_peak_bytes", "freed_bytes", "peak_in_use_bytes", "in_use_start_bytes"),
        *("in_use_end_bytes", "retained_bytes", "bytes", "suspect_bytes", "top_suspect_bytes"),
        "live_at_end_bytes",
    ),
    "signed_bytes": (
        *("delta_bytes", "growth_bytes", "total_growth_bytes", "growth_bytes_per_step"),
    ),
    "time": (
        *("alloc_ps", "free_ps", "time_ps", "start_ps", "end_ps", "peak_time_ps"),
        *("first_alloc_ps", "last_alloc_ps"),
    ),
    "duration": ("lifetime_ps", "duration_ps", "mean_lifetime_ps", "compute_ps"),
    "percent": ("fragmentation",),
    "count": (
        *("live_allocations", "allocations", "frees", "count", "suspect_count", "unestimated"),
        *("live_at_peak", "live_at_end", "compute_count", "live_tensors"),
    ),
    "number": (
        *("num_elements", "step", "step_id", "alloc_event", "free_event"),
        *("xla_allocation_index", "replica", "instructions", "runs", "allocation_index"),
        *("parameter_number", "offset", "logical_buffer", "instruction_id", "event"),
        *("peak_events", "events", "steps", "judged_steps", "grew_steps", "first_step"),
        *("last_step", "ops", "item", "allocation", "stack", "depth", "instant"),
    ),
    "address": ("address",),
    "name": (
        *("op", "scope", "largest_tensor", "path", "belongs_to", "program", "module"),
        *("function", "instruction", "tf_op", "read_by", "top_suspect_op", "variable"),
        *("frame", "layers", "op_names"),
    ),
    "ident": (
        *("host", "allocator", "op_type", "region", "dtype", "shape", "layer", "xla_program"),
        *("xla_buffer", "kind", "largest_shape", "device", "role", "model", "allocation_kind"),
        *("opcode", "tf_op_type", "verdict", "holder", "part", "named_by"),
    ),
    "text": (
        *("name", "source", "estimate_status", "at_start", "at_stop", "updated", "ran"),
        *("counted", "reason", "in_peak_step", "judged", "traced", "user"),
    ),
}
# The headers reports give columns whose name in words would not do.
_HEADERS = {
    "xla_program": "XLA program",
    "xla_buffer": "HLO buffer",
    "xla_buffer_bytes": "XLA buffers",
    "xla_slack_bytes": "XLA slab slack",
    "xla_parameter_bytes": "XLA parameters",
    "estimated_bytes": "Shape × dtype",
    "estimate_status": "Estimate",
    "live_at_peak_bytes": "Live at peak",
    "count": "Allocations",
    "alloc_ps": "Allocated at",
    "path": "Variable",
    "op_type": "Type",
}
# Bookkeeping a table for people leaves out unless asked (exports keep it), and
# the estimate's verdict, which the three byte columns beside it already say.
_HIDDEN = ("alloc_event", "free_event", "step_id", "event", "estimate_status")
# The columns that name a row, and the byte columns that answer a table's question.
_NAMES = ("op", "scope", "layer", "program", "xla_program", "path")
_HEADLINES = (
    *("live_at_peak_bytes", "allocated_bytes", "peak_in_use_bytes", "in_use_bytes"),
    *("bytes", "size_bytes", "peak_bytes", "temp_bytes"),
)
# Columns whose values are parts of another column of the same row.
_PARTS_OF = dict.fromkeys(ROLE_BYTE_COLUMNS, "live_at_peak_bytes")


def _presented(column: Column) -> Column:
    display = next((kind for kind, names in _DISPLAY.items() if column.name in names), None)
    if display is None:  # undeclared (tests/test_columns.py fails): words or a number
        display = "text" if column.dtype in (CATEGORY, "object", "string", "bool") else "number"
    priority = NAME if column.name in _NAMES else HEADLINE if column.name in _HEADLINES else PLAIN
    return replace(
        column,
        display=display,
        header=_HEADERS.get(column.name, ""),
        shown=column.name not in _HIDDEN,
        priority=priority,
        part_of=_PARTS_OF.get(column.name),
    )


COLUMNS: dict[str, Column] = {c.name: _presented(c) for c in _DECLARED}
assert len(COLUMNS) == len(_DECLARED), "a column declared twice"
assert all(c.display in DISPLAYS for c in COLUMNS.values())
