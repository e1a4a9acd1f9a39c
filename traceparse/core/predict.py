"""The ``Predictor`` of a Profile: its prediction at any batch size (docs/predict.md).

``Profile.predict`` gives the table at one batch size; a Predictor answers for
many (``analysis.predict_capacity``: the largest batch that fits, the curve).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceparse.analysis.predict import Predictor, make_predictor
from traceparse.errors import UsageError

if TYPE_CHECKING:
    from traceparse.core.profile import Profile


def predictor_of(
    profile: Profile,
    batch_size: int | None = None,
    from_batch: int | None = None,
    other: Profile | None = None,
    other_batch: int | None = None,
) -> Predictor:
    """A Predictor of ``profile`` (captured at ``from_batch``, else read off it),
    fitted through ``other`` (at ``other_batch``) when given; with two captures the
    one nearer ``batch_size`` gives the order of events. A capture it cannot read a
    prediction from raises ``UsageError`` naming its file."""
    for capture in (profile, other):
        if capture is not None and capture.timeline.empty:
            raise UsageError(
                f"{capture.path}: the capture has no memory events, so there is nothing "
                "to predict from"
            )
    try:
        return make_predictor(
            profile._prediction_input,
            from_batch,
            None if other is None else other._prediction_input,
            batch_size,
            other_batch,
        )
    except UsageError as exc:
        paths = profile.path if other is None else f"{profile.path} (with {other.path})"
        raise UsageError(f"{paths}: {exc}") from None
