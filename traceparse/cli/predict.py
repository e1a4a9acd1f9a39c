"""``traceparse predict``: the peak at another batch size, and the largest batch that fits."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from traceparse.cli import _options as options
from traceparse.cli._options import batch_type
from traceparse.cli.base import Command
from traceparse.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from traceparse.analysis.predict import Fit, Predictor
    from traceparse.output.terminal import Terminal

__all__ = ["PredictCommand", "batch_type"]  # batch_type: cli._options, imported here before


class PredictCommand(Command):
    """Predict the peak at another batch size, and the largest batch that fits.

    Batch sizes are global: what fit is given (under MirroredStrategy each
    replica's tensors hold its share). The captured batch size is --from-batch,
    else weighed off the capture: the leading dimension with the most bytes of
    evidence, the step's input and label tensors where recorded, else the
    tensors it leads in both the forward pass and its gradients; where that
    evidence is weak or tied, predict stops and asks for --from-batch (the
    evidence that decided is printed). Every allocation of the newest run under
    PATH is then sized at the new batch from its shape (a convolution's
    workspace per image, a Winograd one's filter transform fixed), a compiled
    program's slab from its HLO buffers' shapes, and the allocations are
    replayed in their order through a model of the BFC allocator (where each
    chunk goes); bytes held before the capture are kept as captured. Per
    allocator: the predicted peak with low and high bounds, its moment, its
    parts by role and layer with how each was sized, and the largest batch size
    that fits --capacity (default: the allocator's capacity in the capture).
    --with OTHER (the same program captured at another batch size) fits each
    allocation's size through both captures. docs/predict.md says what is
    assumed and how close it came on real models.
    """

    name = "predict"

    @classmethod
    def epilog(cls) -> str:
        return (
            "examples:\n"
            "  traceparse predict logs/ --batch 256\n"
            "  traceparse predict logs/ --batch 256 --capacity 16GiB\n"
            "  traceparse predict logs_b32/ --batch 256 --with logs_b64/\n"
            "  traceparse predict logs/ --batch 256 --fresh\n"
            "  traceparse predict logs/ --batch 256 --format json"
        )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        options.add_capture(parser)
        options.add_batch(
            parser,
            "--batch",
            "the (global) batch size to predict (default: the captured one; "
            "needed unless --precision, --optimizer, --remat or --fresh is given)",
        )
        parser.add_argument(
            "--precision",
            metavar="POLICY",
            help="predict under this Keras dtype policy: mixed_float16, mixed_bfloat16 "
            "or float32 (docs/whatif.md)",
        )
        parser.add_argument(
            "--optimizer",
            metavar="NAME",
            help="predict with this optimizer: sgd, momentum, adam, adamw, rmsprop, "
            "adagrad, adafactor or lion",
        )
        parser.add_argument(
            "--remat",
            metavar="LAYERS",
            help="predict with these layers rematerialised: 'all' or LAYER,LAYER",
        )
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="predict in a fresh process: without what earlier models in the captured "
            "process (a notebook's earlier cells) still held when the capture started",
        )
        options.add_batch(
            parser,
            "--from-batch",
            "the global batch size PATH was captured at (default: weighed off its "
            "input, label and activation tensors)",
        )
        parser.add_argument(
            "--with",
            dest="other",
            metavar="OTHER",
            help="a capture of the same program at another batch size: fit sizes through both",
        )
        options.add_batch(
            parser,
            "--with-batch",
            "the global batch size OTHER was captured at (default: weighed off its "
            "tensors, as for PATH)",
        )
        options.add_capacity(
            parser,
            "the memory to fit in, e.g. 16GiB (default: each allocator's capacity in the capture)",
        )
        options.add_allocator(parser)
        options.add_format(parser, ["table", "json"])
        options.add_output(
            parser,
            "FILE.html",
            "also write an HTML page with the plot of the predicted peak against "
            "the batch size and the capacity line",
        )

    def run(self, args: argparse.Namespace, term: Terminal) -> int:
        import pandas as pd

        from traceparse.analysis.predict import capacity_fit
        from traceparse.core.profile import predictor_of
        from traceparse.output import predict as words
        from traceparse.output.jsonvalues import dumps

        changed = args.fresh or any(
            v is not None for v in (args.precision, args.optimizer, args.remat)
        )
        if changed:
            from traceparse.analysis.whatif import parse_change

            # A request's own errors (an unknown optimizer) before the capture is read.
            parse_change(args.precision, args.optimizer, args.remat)
        profile = options.load_to_predict(args.path, term, args.from_batch is not None)
        other = (
            options.load_to_predict(args.other, term, args.with_batch is not None)
            if args.other
            else None
        )
        if args.with_batch is not None and other is None:
            raise UsageError("--with-batch needs --with OTHER")
        if args.batch is None and not changed:
            raise UsageError(
                "predict needs --batch N, or a change to predict "
                "(--precision, --optimizer, --remat, --fresh)"
            )
        predictor = predictor_of(profile, args.batch, args.from_batch, other, args.with_batch)
        if changed:
            from traceparse.analysis.whatif import with_change

            try:
                predictor = with_change(
                    predictor, args.precision, args.optimizer, args.remat, args.fresh
                )
            except UsageError as exc:  # a change the capture cannot take: name the file
                raise UsageError(f"{profile.path}: {exc}") from None
        if args.batch is None:
            args.batch = predictor.batch
        table = predictor.at(args.batch)
        if args.allocator is not None:
            table = table[table["allocator"].astype(str) == args.allocator]
            if table.empty:
                raise options.no_allocator(profile, args.allocator)
        if table.empty:
            term.line("Nothing to predict: the capture has no memory events.")
            return 0
        breakdown = predictor.breakdown(args.batch)
        fits = []
        for row in table.itertuples(index=False):
            if pd.isna(row.allocator):
                # Events that name no allocator (a damaged capture) have a predicted
                # peak but no allocator to replay a capacity search through.
                continue
            capacity = args.capacity if args.capacity is not None else row.capacity_bytes
            if capacity is None or capacity != capacity:
                continue
            key = (row.host, row.allocator)
            fits.append(capacity_fit(predictor, key, int(capacity), args.batch))
        if args.output:
            _write_page(args.output, profile.path, predictor, table, fits)
        if args.format == "json":
            from traceparse.analysis.predict import report_curves
            from traceparse.records.build import with_predictions

            keys = set(zip(table["host"].astype(str), table["allocator"].astype(str), strict=True))
            mine = [r for r in profile.summary() if (r.host, r.allocator) in keys]
            records = with_predictions(mine, report_curves(predictor))
            term.raw(dumps(words.as_json(table, breakdown, fits, records)) + "\n")
            return 0
        words.render(term, table, breakdown, fits)
        return 0


def _write_page(
    path: str, source: str, predictor: Predictor, table: pd.DataFrame, fits: list[Fit]
) -> None:
    """The HTML page: per allocator its prediction and the plot against the batch size."""
    import pandas as pd

    from traceparse.analysis.predict import curve, plot_batches
    from traceparse.output.export import write_output
    from traceparse.report.predict import prediction_page, prediction_section

    by_key = {(f.host, f.allocator): f for f in fits}
    sections = []
    for _, row in table.iterrows():
        if pd.isna(row["allocator"]):
            continue  # no allocator to replay through (see run)
        key = (row["host"], row["allocator"])
        fit = by_key.get(key)
        largest = None if fit is None else fit.largest
        batches = plot_batches(int(row["from_batch"]), int(row["batch_size"]), largest)
        sections.append(prediction_section(row, curve(predictor, key, batches), fit))
    # write_output: a path that cannot be written is "cannot write the output", exit 2.
    write_output(prediction_page(f"Predicted peak: {source}", sections), path)
