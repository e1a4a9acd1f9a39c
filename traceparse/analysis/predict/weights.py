"""The weights of a capture that names no variable, read off their gradients.

The Keras ``TensorBoard`` callback's captures (most public ones) hold no variable
inventory, and an optimizer whose update allocates nothing weight-shaped (Adam
on a GPU is one ``ResourceApplyAdam`` kernel per variable) shows no slot either:
what a step's backward pass computes for each variable is the one record of it.
``Predictor.read_before`` names what was held before the capture with these,
and the what-ifs (``analysis/whatif``) count the parameters they change.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceparse.analysis.predict.batch import dims, kernel_names

GRADIENT_TAPE = "gradient_tape/"

# Kernels whose output is the gradient of a layer's variable, not of its input
# (tensorflow/python/ops/nn_grad.py): a convolution's filter gradient
# (``Conv2DBackpropFilter``, ``Conv3DBackpropFilterV2``,
# ``DepthwiseConv2dNativeBackpropFilter``, [r, r, Cin, Cout] as the kernel), a
# bias's (``BiasAddGrad``, [C]) and a batch normalisation's scale and offset
# gradients (``FusedBatchNormGrad*``'s [C] outputs; its first output is the
# input's gradient, [N, ...]).
FILTER_GRADIENT = re.compile(r"(Conv[23]D|DepthwiseConv2dNative)BackpropFilter(V2|WithBias)?")
BIAS_GRADIENT = re.compile(r"BiasAddGrad|FusedBatchNormGrad(V2|V3)?")
# oneDNN's rewrites of those kernels on a CPU (``_MklMatMul``, ``_MklNativeConv2D...``:
# tensorflow/core/common_runtime/mkl_layout_pass.cc) compute the same gradients.
ONEDNN = re.compile(r"^_Mkl(Native)?")
# A scope of a while loop's body (``while/``, ``while_grad/``): its gradient pieces are
# one iteration's, summed into the variable's gradient after the loop (while_v2).
LOOP_SCOPE = re.compile(r"(?:^|/)while(?:_grad)?(?:_\d+)?/")
FLOATS = ("float32", "float16", "bfloat16", "float64", "half")


def gradient_weights(
    allocations: pd.DataFrame, pick: np.ndarray, grows: np.ndarray, layers: np.ndarray
) -> np.ndarray:
    """Per allocation, the elements of the variable whose gradient it is, among the
    ``pick`` allocations (one step's); 0 elsewhere. ``grows``: per allocation,
    whether its size follows the batch (``Sizing.point_grows``); ``layers``: each one's
    layer (``naming.place``).

    A gradient is an op's output (a layout copy of the filter in cuDNN's order,
    [Cout, Cin, r, r], is the op's temporary, not counted) of a kernel of
    ``FILTER_GRADIENT`` (rank 2 or more) or ``BIAS_GRADIENT`` (rank 1), or of a
    ``MatMul`` under the tape: a Dense layer's ``y = x W`` has the gradients
    ``dy W^T`` [B, in] and ``x^T dy`` [in, out], made in that order
    (``_MatMulGrad`` in tensorflow/python/ops/math_grad.py), so the kernel's is
    the second, which TF names ``MatMul_1`` in the gradient's scope, or the only
    one where the input needs no gradient (the first layer); and it keeps its
    size at every batch (a Dense on [B, T, in] folds the batch into [B x T, in]
    rows, ``tf.tensordot``, whose input gradient is also 2-D). Not inside a while loop's body
    (``LOOP_SCOPE``): a recurrent layer's per-iteration pieces. A layer called
    twice (a shared layer) has a gradient per call, summed into its variable's
    (``AddN``): one per layer, shape and output of its op counts. (Variables are
    float32 under every Keras policy: 4 bytes an element.)"""
    out = np.zeros(len(allocations))
    if "region" not in allocations or not pick.any():
        return out
    rows = np.flatnonzero(pick)
    sub = allocations.iloc[rows]
    ops = sub["op"].astype(object).fillna("").astype(str)
    types = sub["op_type"].astype(object) if "op_type" in sub else pd.Series(None, index=sub.index)
    # Without a recorded type, the kernel the name says.
    kernels = types.where(types.notna() & (types.astype(str) != ""), kernel_names(ops))
    kernels = kernels.astype(str).str.replace(ONEDNN, "", regex=True)
    output = (sub["region"].astype(object) == "output").to_numpy(dtype=bool)
    floats = sub["dtype"].astype(object).isin(FLOATS).to_numpy(dtype=bool)
    shaped = [dims(s) for s in sub["shape"].astype(object)]
    rank = np.array([len(d) if d else 0 for d in shaped])
    elements = np.array([float(np.prod(d)) if d else 0.0 for d in shaped])
    filters = kernels.map(lambda k: FILTER_GRADIENT.fullmatch(k) is not None).to_numpy(dtype=bool)
    biases = kernels.map(lambda k: BIAS_GRADIENT.fullmatch(k) is not None).to_numpy(dtype=bool)
    taped = ops.str.contains(GRADIENT_TAPE, regex=False).to_numpy(dtype=bool)
    looped = ops.str.contains(LOOP_SCOPE).to_numpy(dtype=bool)
    kept = ~grows[rows]
    # The second of the two a MatMul's gradient makes (TF suffixes it ``_1``), or
    # the only one where the input needs none (a model's first layer).
    matmul = (kernels == "MatMul").to_numpy(dtype=bool) & taped & (rank == 2)
    scopes = ops.str.rsplit("/", n=1).str[0]
    alone = scopes.map(scopes[matmul].value_counts()).fillna(0).to_numpy() == 1
    last = ops.str.rsplit("/", n=1).str[-1]
    second = last.str.fullmatch(r"(_Mkl(Native)?)?MatMul_1").to_numpy(dtype=bool)
    dense = matmul & kept & (second | alone)
    counted = output & floats & ~looped
    counted &= (filters & (rank >= 2)) | (biases & (rank == 1)) | dense
    found = pd.DataFrame(
        {
            "layer": pd.Series(layers[rows], dtype=object).fillna("").astype(str).to_numpy(),
            "op": ops.to_numpy(),
            "shape": sub["shape"].astype(str).to_numpy(),
        }
    )[counted]
    # The n-th output of that shape of its op (FusedBatchNormGrad's scale and offset).
    found["output"] = found.groupby(["op", "shape"]).cumcount()
    once = ~found.duplicated(["layer", "shape", "output"]).to_numpy(dtype=bool)
    keep = np.flatnonzero(counted)[once]
    out[rows[keep]] = elements[keep]
    return out
