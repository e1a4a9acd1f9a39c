"""JAX op names (HLO ``op_name`` of a jitted flax/optax step) placed by role and layer.

The names are as JAX 0.10.2 wrote them into ``jit_train_step``'s HLO metadata
(``benchmarks/make_jax_optax.py``)."""

from __future__ import annotations

import pytest

from traceparse.analysis.naming.jax import jax_role
from traceparse.analysis.naming.layers import (
    ACTIVATION,
    GRADIENT,
    NO_LAYER,
    OTHER,
    KnownNames,
    place_op,
)


@pytest.mark.parametrize(
    ("op", "layer", "kind"),
    [
        ("jit(train_step)/transpose(jvp(Net))/big/transpose", "big", GRADIENT),
        ("jit(train_step)/transpose(jvp(Net))/conv2/conv_general_dilated", "conv2", GRADIENT),
        ("jit(train_step)/transpose(jvp(Net))/select_n", NO_LAYER, GRADIENT),
        ("jit(train_step)/jvp(Net)/conv1/conv_general_dilated", "conv1", ACTIVATION),
        ("jit(train_step)/jvp(Net)/jit(relu)/max", NO_LAYER, ACTIVATION),
        # Unscoped (optax's update, a forward-only program): the names say no role.
        ("jit(train_step)/add", NO_LAYER, OTHER),
        ("jit(matmul)/dot_general", NO_LAYER, OTHER),
    ],
)
def test_jax_op_names(op: str, layer: str, kind: str) -> None:
    placed = place_op(op, KnownNames())
    assert (placed.layer, placed.kind) == (layer, kind)


def test_tf_names_are_not_jax() -> None:
    assert jax_role("gradient_tape/mycnn_1/conv_a_1/Conv2D") is None
    assert place_op("gradient_tape/mycnn_1/conv_a_1/Conv2D", KnownNames()).kind == GRADIENT
