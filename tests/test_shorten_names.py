"""Issue 36 item 4: a name cut to fit loses TensorFlow's wrapper scopes first, then
its middle scopes; the direction (``gradient_tape``) and the layer and op stay."""

from __future__ import annotations

import pytest

from traceparse.output.cells import render_plain_table, shorten

GRADIENT = "StatefulPartitionedCall/gradient_tape/functional_1/dense_1/einsum_1/Einsum"
ADAM = "__inference_one_step_on_data_1132/StatefulPartitionedCall/adam/Sqrt_29"


@pytest.mark.parametrize(
    ("name", "width", "cut"),
    [
        (GRADIENT, 80, GRADIENT),
        (GRADIENT, 60, "…/gradient_tape/functional_1/dense_1/einsum_1/Einsum"),
        (GRADIENT, 40, "gradient_tape/…/dense_1/einsum_1/Einsum"),
        (GRADIENT, 30, "gradient_tape/…/Einsum"),
        (GRADIENT, 20, "…/einsum_1/Einsum"),
        (ADAM, 20, "…/adam/Sqrt_29"),
        ("model/" + "x" * 40, 20, "model/xxxxxxxxxxxxxx"[:9] + "…" + "x" * 10),
    ],
)
def test_names_lose_wrappers_then_middle_scopes(name: str, width: int, cut: str) -> None:
    assert shorten(name, width) == cut
    assert len(cut) <= width


def test_the_issues_name_keeps_the_direction_and_the_layer() -> None:
    cut = shorten(GRADIENT, 40)
    # Was "StatefulPartitioned…n_1/einsum_1/Einsum": no gradient_tape, no layer.
    assert cut.startswith("gradient_tape/") and "dense_1" in cut and cut.endswith("/Einsum")


def test_sentences_and_single_words_still_lose_their_middle() -> None:
    sentence = "a sentence that names a/path and goes on and on"
    assert shorten(sentence, 21) == sentence[:10] + "…" + sentence[-10:]
    assert shorten("a" * 300, 20) == "a" * 9 + "…" + "a" * 10


def test_a_plain_table_shows_the_cut_name() -> None:
    lines = render_plain_table(["op", "bytes"], [[GRADIENT, "4 MiB"]], [False, True], width=50)
    assert all(len(line) <= 50 for line in lines)
    assert lines[2].split()[0] == shorten(GRADIENT, len(lines[2].split()[0]))
    assert lines[2].startswith("gradient_tape/…/") or lines[2].startswith("…/")
