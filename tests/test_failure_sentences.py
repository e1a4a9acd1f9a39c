"""The failure sentence's three out-of-memory forms and the rest (issue 39), on
hand-made ``Failure`` figures: the wording the summary, reports and check open with."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from traceparse.analysis.failure import Failure, _allocator_of, holders_at
from traceparse.output.failure import failure_sentence, to_free_sentence

GiB, MiB = 2**30, 2**20

BASE = Failure(
    host="h",
    path="p",
    way="step",
    exception_type="ResourceExhaustedError",
    message="OOM when allocating tensor",
    message_cut=False,
    out_of_memory=True,
    op="functional_1/blowup_1/cond/random_uniform/RandomUniform",
    op_type="RandomUniform",
    shape="[16777215,4096]",
    dtype="float32",
    requested_bytes=16777215 * 4096 * 4,
    allocator="mklcpu",
    device=None,
    step=2,
    caught_ps=10,
    time_ps=5,
    in_use_bytes=24 * MiB,
    capacity_bytes=int(23.5 * GiB),
    free_bytes=int(23.5 * GiB) - 24 * MiB,
    fragmentation=0.0,
    tensorflow="2.21.0",
)


def test_the_request_alone_exceeds_the_capacity() -> None:
    assert failure_sentence(BASE) == (
        "Out of memory at step 2: `functional_1/blowup_1/cond/random_uniform/RandomUniform` "
        "asked `mklcpu` for 256 GiB (`[16777215,4096]` float32); 24 MiB were in use of "
        "23.5 GiB. The request alone exceeds the capacity."
    )
    assert "Nothing can be freed" in str(to_free_sentence(BASE))


def test_fragmentation() -> None:
    f = replace(
        BASE,
        requested_bytes=80 * MiB,
        in_use_bytes=int(15.2 * GiB),
        capacity_bytes=int(15.2 * GiB) + 612 * MiB,
        free_bytes=612 * MiB,
        shape="[20971520]",
    )
    assert f.shortfall_bytes == 0
    assert failure_sentence(f).endswith(
        "612 MiB were free but the allocator could not give 80 MiB in one piece (fragmentation)."
    )


def test_largest_holders_and_what_to_free() -> None:
    f = replace(
        BASE,
        requested_bytes=900 * MiB,
        in_use_bytes=15 * GiB,
        capacity_bytes=15 * GiB + 600 * MiB,
        free_bytes=600 * MiB,
    )
    text = failure_sentence(f, [("encoder", 9 * GiB), ("decoder", 4 * GiB), ("x", 1), ("y", 1)])
    assert "15 GiB were in use of 15.6 GiB." in text
    assert "The largest holders then were `encoder` 9 GiB, `decoder` 4 GiB, `x` 1 B." in text
    assert text.endswith("300 MiB more would have had to be free for the request to fit.")
    assert f.shortfall_bytes == 300 * MiB
    assert "300 MiB (314,572,800 bytes) more" in str(to_free_sentence(f))


def test_unknown_parts_are_said_not_guessed() -> None:
    f = replace(BASE, op=None, shape=None, dtype=None, requested_bytes=None, step=None)
    text = failure_sentence(f)
    assert text.startswith("Out of memory: a request asked `mklcpu` for memory; 24 MiB")
    assert to_free_sentence(f) is None
    assert "no allocator counters" in failure_sentence(replace(BASE, in_use_bytes=None))


def test_another_exception() -> None:
    f = replace(BASE, out_of_memory=False, exception_type="ValueError", message="\n bad\x1b[0m\nx")
    assert failure_sentence(f) == (
        "The run ended in `ValueError` at step 2: bad\\x1b[0m. "
        "The memory figures below are up to the failure."
    )


def test_device_names_its_allocator() -> None:
    names = ["GPU_0_bfc", "GPU_1_bfc", "gpu_host_bfc"]
    assert _allocator_of("/job:localhost/replica:0/task:0/device:GPU:1", names) == "GPU_1_bfc"
    assert _allocator_of(None, names) is None
    assert _allocator_of(None, ["mklcpu"]) == "mklcpu"


def test_holders_group_and_name_what_has_no_name() -> None:
    rows = pd.DataFrame(
        {
            "host": ["h"] * 4 + ["other"],
            "allocator": ["mklcpu"] * 5,
            "holder": ["allocation", "allocation", "variable", "reserved", "allocation"],
            "bytes": pd.array([3, 5, 4, 0, 100], dtype="Int64"),
            "layer": ["a", "a", "b", "(reserved)", "z"],
            "op": ["MatMul", "Add", None, None, "Mul"],
        }
    )
    by_op = holders_at(rows, BASE, "op")
    assert list(zip(by_op["name"], by_op["bytes"], strict=True)) == [
        ("Add", 5),
        ("(variable)", 4),
        ("MatMul", 3),
    ]
    by_layer = holders_at(rows, BASE, "layer")
    assert list(by_layer["name"]) == ["a", "b"] and by_layer["share"].sum() == 1.0
