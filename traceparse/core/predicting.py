"""``Profile``'s prediction face (issue 40, docs/predict.md): ``predict``,
``predicted_breakdown``, ``predictor``, and ``traceparse.predictor_of``.

The rules are in ``analysis/predict`` (``source.predictor_from`` is the entry
point); this mixin hands a Profile's ``PredictSource`` to it and caches the
capture's own Predictor, which the reports' curves and what-ifs share. Nothing
here is imported by the summary: prediction loads when a prediction is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceparse.core.memory import pooled_property
from traceparse.errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from traceparse.analysis.failure import Failure
    from traceparse.analysis.naming import CaptureNaming
    from traceparse.analysis.predict import Capture as PredictionInput
    from traceparse.analysis.predict import Predictor, PredictSource
    from traceparse.core.xla import XlaParts
    from traceparse.decode.batch import BatchRecord

__all__ = ["Predicting", "checked_batch", "predictor_of"]


class Predicting:
    """The prediction methods of ``Profile``, over the tables it builds."""

    if TYPE_CHECKING:  # Profile's, built there and in its other mixins
        _xla: XlaParts
        _ends: np.ndarray
        _naming: CaptureNaming
        allocations: pd.DataFrame
        timeline: pd.DataFrame
        peak: pd.DataFrame
        breakdown: pd.DataFrame
        variables: pd.DataFrame
        stacks: pd.DataFrame
        xla_buffers: pd.DataFrame
        xla_parameters: pd.DataFrame
        _op_time: pd.DataFrame

        @property
        def path(self) -> str: ...
        @property
        def paths(self) -> list[str]: ...
        @property
        def allocators(self) -> list[str]: ...
        @property
        def recorded_batch(self) -> BatchRecord | None: ...
        @property
        def has_sources(self) -> bool: ...
        @property
        def _has_inventory(self) -> bool: ...
        def failures(self) -> list[Failure]: ...

    @property
    def _op_names(self) -> frozenset[str]:
        """The distinct names of the ops the capture's op events ran."""
        ops = self._op_time["op"] if "op" in self._op_time else pd.Series(dtype=object)
        return frozenset(ops.dropna().astype(str).unique())

    @pooled_property
    def _prediction_input(self) -> PredictionInput:
        from traceparse.analysis.predict import prediction_input

        known, shapes = self._naming.known
        return prediction_input(
            self.allocations,
            self.timeline,
            self._ends,
            known,
            shapes,
            self.peak,
            self.breakdown,
            self.variables if self._has_inventory else None,
            self.xla_buffers,
            self.xla_parameters,
            self._xla.programs if self._xla.present else None,
            self.stacks if self.has_sources else None,
            self.failures(),
            self._op_names,
        )

    @property
    def _predict_source(self) -> PredictSource:
        """This capture as a prediction reads it (made each time: it refers to the
        Profile, which must not refer back to it)."""
        from traceparse.analysis.predict import PredictSource

        return PredictSource(
            self.path,
            self.paths,
            self.allocators,
            self.allocations,
            self.timeline,
            self.recorded_batch,
            lambda: self._prediction_input,
        )

    @pooled_property
    def _own_predictor(self) -> Predictor | UsageError:
        try:
            return predictor_of(self)
        except UsageError as exc:  # kept: asked again, it is said again
            return exc

    def predictor(self) -> Predictor:
        """The ``Predictor`` of this capture at the batch it was made at, built once:
        the one the reports' prediction curves and what-ifs share (one calibration).
        ``traceparse.predictor_of(prof, ...)`` makes one for a batch given or a
        second capture. A ``UsageError`` names the file where the captured batch
        size cannot be read.

        >>> prof.predictor().breakdown(256)  # doctest: +SKIP
        """
        own = self._own_predictor
        if isinstance(own, UsageError):
            raise own
        return own

    @property
    def _report_predictor(self) -> Predictor | None:
        """``predictor()``, None where the captured batch size cannot be read."""
        own = self._own_predictor
        return None if isinstance(own, UsageError) else own

    @pooled_property
    def _report_predictions(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The reports' curve of the predicted peak against the batch size, per
        (host, allocator); empty where the captured batch size cannot be read."""
        from traceparse.analysis.predict import report_curves

        predictor = self._report_predictor
        return {} if predictor is None else report_curves(predictor)

    # Prediction at another batch size (issue 40, analysis/predict.py, docs/predict.md).
    def predict(
        self,
        batch_size: int | None = None,
        from_batch: int | None = None,
        other: Predicting | None = None,
        other_batch: int | None = None,
        *,
        precision: str | None = None,
        optimizer: str | None = None,
        remat: str | tuple[str, ...] | None = None,
        fresh: bool = False,
    ) -> pd.DataFrame:
        """Per (host, allocator): the predicted peak at ``batch_size`` (default: the
        captured batch size, where the prediction is the capture itself) (with
        ``low_bytes`` / ``high_bytes``), its moment (``step``, ``op``), its bytes by
        role and a ``basis``; ``predicted_breakdown()`` has them by layer and role
        (also in ``attrs["breakdown"]``, which most pandas operations drop).

        The captured batch size is read off the capture unless ``from_batch``
        gives it; ``other`` (a Profile of the same program at another batch
        size, ``other_batch`` when it cannot be read off it) fits each
        allocation's size through both (docs/predict.md). ``precision``
        (``mixed_float16``, ``mixed_bfloat16``, ``float32``), ``optimizer`` (``sgd``,
        ``adam``, ...) and ``remat`` (``"all"`` or layer names) predict the peak with
        that change made (docs/whatif.md); ``fresh=True`` in a fresh process,
        without what earlier models in the captured process still held.

        >>> prof.predict(256)  # doctest: +SKIP

        A batch that is not a whole number from 1 to ``MAX_BATCH`` raises
        ``TypeError`` / ``ValueError`` (``PredictArgumentError``) naming it.
        """
        from traceparse.analysis.predict import check_batches
        from traceparse.analysis.whatif import with_change

        check_batches(batch_size=batch_size, from_batch=from_batch, other_batch=other_batch)
        predictor = predictor_of(self, batch_size, from_batch, other, other_batch)
        predictor = with_change(predictor, precision, optimizer, remat, fresh)
        batch = predictor.batch if batch_size is None else batch_size
        table = predictor.at(batch)
        table.attrs["breakdown"] = predictor.breakdown(batch)
        return table

    def predicted_breakdown(
        self,
        batch_size: int | None = None,
        from_batch: int | None = None,
        other: Predicting | None = None,
        other_batch: int | None = None,
    ) -> pd.DataFrame:
        """What ``predict`` (same arguments) predicts, by layer and role: per (host,
        allocator) the bytes of each layer's weights, optimizer state, activations
        and gradients at the predicted peak, with the bytes captured and the basis.
        Many batch sizes at once: ``traceparse.predictor_of(prof).breakdown(n)``.

        >>> prof.predicted_breakdown(256)  # doctest: +SKIP
        """
        predictor = predictor_of(self, batch_size, from_batch, other, other_batch)
        return predictor.breakdown(predictor.batch if batch_size is None else batch_size)


def checked_batch(value: object, what: str = "batch_size") -> int:
    """``value`` as a batch size (``analysis.predict.checked_batch``)."""
    from traceparse.analysis.predict import checked_batch as checked

    return checked(value, what)


def predictor_of(
    profile: Predicting,
    batch_size: int | None = None,
    from_batch: int | None = None,
    other: Predicting | None = None,
    other_batch: int | None = None,
) -> Predictor:
    """A Predictor of ``profile`` (captured at ``from_batch``, else at the batch the
    capture recorded, else read off it), fitted through ``other`` (at ``other_batch``,
    else recorded, else read) when given; with two captures the one nearer
    ``batch_size`` gives the order of events. A capture it cannot read a prediction
    from raises ``UsageError`` naming its file (``analysis.predict.predictor_from``).

    A recorded batch (``Profile.recorded_batch``) comes before anything read off the
    shapes: it is what the steps were fed, where the shapes only suggest it."""
    from traceparse.analysis.predict import predictor_from

    theirs = None if other is None else other._predict_source
    return predictor_from(profile._predict_source, batch_size, from_batch, theirs, other_batch)
