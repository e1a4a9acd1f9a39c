"""The public GPU captures' models (fixtures/gpu_*), counted from their architectures."""

from __future__ import annotations


def _conv(kernel: int, inputs: int, filters: int) -> int:
    """A Conv2D's trainable parameters: its kernel and its bias."""
    return kernel * kernel * inputs * filters + filters


# Trainable parameters of the public GPU captures' models, counted from their
# architectures as each fixture's PROVENANCE.md describes them (not from the
# capture). AlexNet: the green channel of 256x256 images; Conv2D 96 11x11 stride 4
# (62x62), pool 3/2 (30x30), Conv2D 256 5x5, pool (14x14), Conv2D 384 3x3 twice,
# Conv2D 256 3x3, pool (6x6), Flatten, Dense 4; a BatchNormalization after each
# convolution (scale and offset trainable).
ALEXNET_PARAMS = (
    _conv(11, 1, 96)
    + _conv(5, 96, 256)
    + _conv(3, 256, 384)
    + _conv(3, 384, 384)
    + _conv(3, 384, 256)
    + 2 * (96 + 256 + 384 + 384 + 256)
    + 6 * 6 * 256 * 4
    + 4
)
# The chess CNN: 8x8x12 boards; Conv2D 16 3x3 twice, 32 3x3 (stride 2), 32 3x3, 64
# 3x3, 128 1x1 twice (a 3x3 map of 128 channels: Flatten gives 1152), Dense 16,
# Dense 1.
CHESS_PARAMS = (
    _conv(3, 12, 16)
    + _conv(3, 16, 16)
    + _conv(3, 16, 32)
    + _conv(3, 32, 32)
    + _conv(3, 32, 64)
    + _conv(1, 64, 128)
    + _conv(1, 128, 128)
    + (1152 * 16 + 16)
    + (16 * 1 + 1)
)
