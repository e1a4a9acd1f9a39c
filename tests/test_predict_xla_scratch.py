"""Library calls' workspaces inside a compiled program (``predict.xla._workspaces``):
XLA's GPU rewriter makes each cuDNN convolution a custom call named after its kind,
whose tuple's second element, u8[bytes], is the autotuned algorithm's workspace.
The point grows it per example, as TensorFlow's own convolution workspaces; the
other reading keeps it. Another call's (a GEMM's s8[bytes]) the other way round."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import FIXTURES

import traceparse
from traceparse.analysis.predict.batch import HLO, Sizing
from traceparse.analysis.predict.xla import _workspaces, slab_sizing


def test_the_workspace_of_a_real_gpu_convolution_is_found() -> None:
    # A public JAX capture on MI300X GPUs: one 3-D convolution, cudnn-conv.1 (MIOpen's
    # under the same names), whose workspace is u8[7150336].
    buffers = traceparse.load(FIXTURES / "jax08_conv").xla_buffers
    conv, other = _workspaces(buffers)
    found = buffers[conv]
    assert len(found) >= 1 and not other.any()
    assert set(found["shape"].astype(str)) == {"[7150336]"}
    assert set(found["instruction"].astype(str)) == {"cudnn-conv.1"}


def test_the_workspaces_of_real_gpu_matrix_products_are_found() -> None:
    # The same GPUs' bfloat16 products: hipBLASLt calls (custom-call.N) whose
    # workspaces are int8 arrays; no convolution among them.
    buffers = traceparse.load(FIXTURES / "jax08_gemm").xla_buffers
    conv, other = _workspaces(buffers)
    assert not conv.any() and other.any()
    found = buffers[other]
    assert set(found["dtype"].astype(str)) == {"int8"}
    assert "[4194304]" in set(found["shape"].astype(str))
    # Tensors the calls make (their products) are not workspaces.
    made = buffers[(buffers["opcode"].astype(str) == "custom-call").to_numpy()]
    assert (made["dtype"].astype(str) == "bfloat16").any()


def _slab(instruction: str) -> tuple[Sizing, float]:
    """One slab of 32 examples' [32,64] activation (8 KiB) and a u8[4096] buffer
    of ``instruction``, sized at its captured batch."""
    buffers = pd.DataFrame(
        {
            "host": ["h", "h"],
            "program": ["p", "p"],
            "allocation_index": [3, 3],
            "logical_buffer": [1, 2],
            "instruction": ["fusion.1", instruction],
            "opcode": ["fusion", "custom-call"],
            "dtype": ["float32", "uint8"],
            "shape": ["[32,64]", "[4096]"],
            "size_bytes": [8192, 4096],
        }
    )
    allocations = pd.DataFrame({"host": ["h"], "xla_program": ["p"], "xla_allocation_index": [3]})
    size = 8192.0 + 4096.0
    sizing = Sizing.of_rows(
        np.array([size]),
        np.zeros(1),
        np.array([size]),
        np.zeros(1),
        np.array(["kept"], dtype=object),
    )
    slab_sizing(sizing, allocations, buffers, {}, 32, set(), np.array([size]), {})
    assert sizing.basis[0] == HLO
    return sizing, size


def test_a_convolution_workspace_grows_at_the_point_and_is_kept_in_the_other_reading() -> None:
    sizing, size = _slab("cudnn-conv-bw-filter.2")
    # The point: the whole slab per example; the other reading: the workspace fixed.
    assert sizing.fixed[0] == 0.0 and sizing.per_example[0] * 32 == size
    assert sizing.alt_fixed[0] == 4096.0 and sizing.alt_per_example[0] * 32 == 8192.0


def test_another_calls_workspace_is_kept_at_the_point_and_grows_in_the_other_reading() -> None:
    # A cuBLAS call's workspace (cublas-gemm.N) has a fixed size on NVIDIA GPUs
    # (XLA's GEMM workspace rewriter); hipBLASLt's follows the problem: the bounds.
    sizing, size = _slab("cublas-gemm.1")
    assert sizing.fixed[0] == 4096.0 and sizing.per_example[0] * 32 == 8192.0
    assert sizing.alt_fixed[0] == 0.0 and sizing.alt_per_example[0] * 32 == size


def test_workspaces_are_no_batch_evidence() -> None:
    from traceparse.analysis.predict.xla import xla_evidence

    buffers = traceparse.load(FIXTURES / "jax08_gemm").xla_buffers
    shapes, _, _, _ = xla_evidence(buffers, buffers.iloc[0:0].assign(updated=False))
    _, other = _workspaces(buffers)
    assert len(shapes) == len(buffers) - int(other.sum())
    assert "[4194304]" not in {str(s) for s in shapes}
