"""A convolution workspace's batch-independent part, where its algorithm shows.

cuDNN's non-fused Winograd algorithms (``CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED``
and its backward-data and backward-filter twins; cuDNN developer guide,
"Convolution algorithms") compute a convolution with an ``r x r`` filter as
``F(m x m, r x r)``: each filter transformed once into an ``a x a`` tile (``a =
m + r - 1``), the input cut into ``T`` tiles per image per channel (``T =
ceil(H_out / m) * ceil(W_out / m)``), each transformed into an ``a x a`` tile,
multiplied with the filters' tiles and transformed back. Its workspace holds
the three transforms in float32:

    4 * a**2 * (C_in * C_out  +  N * T * (C_in + C_out))   bytes

the filters' part fixed, the tiles' part per image. TF's autotuner picks the
algorithm per shape (``AutotuneConv`` in tensorflow/core/kernels/conv_ops_gpu.cc)
and asks its workspace size of cuDNN (``cudnnGetConvolution*WorkspaceSize``);
the capture records only the size, a rank-1 ``uint8`` buffer. Where that size
is exactly of this form for one of the capture's filters at the captured batch,
with ``T`` the tiles of one of the capture's square feature maps of that
filter's channels (so that a size of this form by chance is unlikely), the
filters' part is the fixed part of the workspace at any batch, and the rest
grows per image; otherwise nothing is known of its split (``scratch_kinds``:
sized per example).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

FLOAT = 4  # bytes of a float32 transform element
# Output tile sizes m tried per filter size (cuDNN's non-fused Winograd tiles;
# F(4x4, 3x3) for 3x3 filters, larger tiles for 5x5).
TILES = range(2, 10)


def filter_shapes(shapes: Iterable[object], ops: Iterable[object]) -> set[tuple[int, int, int]]:
    """(r, C_in, C_out) of every square 2-D convolution filter a backprop-filter op
    produced in the capture (its gradient has the filter's shape, [r, r, C_in,
    C_out] in TF's HWIO layout)."""
    found = set()
    for shape, op in zip(shapes, ops, strict=True):
        if not isinstance(op, str) or not op.endswith("BackpropFilter"):
            continue
        if not isinstance(shape, str):
            continue
        try:
            d = tuple(int(x) for x in shape.strip("[]").split(","))
        except ValueError:
            continue
        if len(d) == 4 and d[0] == d[1] and d[0] > 1:
            found.add((d[0], d[2], d[3]))
    return found


def feature_maps(shapes: Iterable[object], batch: int) -> set[tuple[int, int]]:
    """(side, channels) of every square feature map of the batch: rank-4 shapes
    led by ``batch``, NCHW ([N, C, H, H], cuDNN's layout on a GPU) or NHWC."""
    found = set()
    for shape in shapes:
        if not isinstance(shape, str) or shape.count(",") != 3:
            continue
        try:
            n, a, b, c = (int(x) for x in shape.strip("[]").split(","))
        except ValueError:
            continue
        if n != batch:
            continue
        if b == c:
            found.add((b, a))
        if a == b:
            found.add((a, c))
    return found


def winograd_fixed(
    requested: int,
    batch: int,
    filters: set[tuple[int, int, int]],
    maps: set[tuple[int, int]],
) -> int | None:
    """The filters' transform (bytes) of a workspace of ``requested`` bytes at
    ``batch`` when it is a non-fused Winograd workspace of exactly one size
    among ``filters`` (``filter_shapes``) over one of ``maps`` (``feature_maps``),
    else None (no match, or several that disagree)."""
    found = set()
    for r, c_in, c_out in filters:
        sides = {side for side, channels in maps if channels in (c_in, c_out)}
        for m in TILES:
            tile = FLOAT * (m + r - 1) ** 2
            fixed = tile * c_in * c_out
            per_tile = tile * (c_in + c_out) * batch
            rest = requested - fixed
            if rest <= 0 or rest % per_tile:
                continue
            if any(math.ceil(side / m) ** 2 == rest // per_tile for side in sides):
                found.add(fixed)
    return found.pop() if len(found) == 1 else None
