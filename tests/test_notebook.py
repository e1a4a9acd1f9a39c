"""A Profile in Jupyter: ``_repr_html_`` parsed, and a real notebook executed (nbclient).

The parse checks what the summary must hold (each allocator's peak, the
attribution parts summing to the bytes in use, the largest layers and ops) and
that it runs nothing (no script, no ``on*`` handler, nothing fetched). The
notebook test runs a kernel with nbconvert's executor (the ``dev`` extra
installs it, so CI runs it) and reads the cell's ``text/html`` output.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

import traceparse
from traceparse.output.units import format_bytes

REPO = Path(__file__).resolve().parent.parent


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.sources: list[str] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        self.sources += [v or "" for name, v in attrs if name in ("src", "href")]
        if tag == "tr":
            self.rows.append([])

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1] == "style":
            return
        self.text.append(data)
        if self.rows and data.strip():
            self.rows[-1].append(data.strip())


def _parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


@pytest.fixture(scope="module")
def cnn() -> traceparse.Profile:
    return traceparse.load(REPO / "fixtures/layers_cnn")


def test_repr_html_shows_the_summary_and_runs_nothing(cnn: traceparse.Profile) -> None:
    page = _parse(cnn._repr_html_())
    assert "script" not in page.tags and not page.handlers and not page.sources
    text = " ".join(page.text)
    (summary,) = cnn.summary()
    assert format_bytes(summary.peak_bytes) in text and "mklcpu" in text
    # The attribution rows add up to the bytes in use (the total row).
    start = next(i for i, r in enumerate(page.rows) if r[:1] == ["Component"])
    parts = page.rows[start + 1 :]
    total = next(r for r in parts if r[0] == "in use at the peak")
    assert total[1] == format_bytes(summary.peak_bytes)
    assert "allocated before the capture" in [r[0] for r in parts]
    # The largest layer and op holding bytes at the peak are named.
    layers = cnn.layers().sort_values("live_at_peak_bytes", ascending=False)
    assert str(layers["layer"].iloc[0]) in text
    ops = cnn.ops.sort_values("live_at_peak_bytes", ascending=False)
    assert str(ops["op"].iloc[0]) in text


def test_more_or_fewer_rows_inline_and_as_text(cnn: traceparse.Profile) -> None:
    from traceparse.report.notebook import NotebookReport

    shown = NotebookReport(cnn, top=2)
    html = shown._repr_html_()
    assert html == NotebookReport(cnn, top=2)._repr_html_()
    ops_rows = html.split("Ops holding memory at the peak", 1)[1].split("</table>", 1)[0]
    assert ops_rows.count("<tr>") == 3  # the header and two ops
    assert str(shown).startswith("Peak ")


def test_a_hostile_name_is_text(tmp_path: Path) -> None:
    from helpers.report import hostile_profile

    html = hostile_profile()._repr_html_()
    page = _parse(html)
    assert "script" not in page.tags and not page.handlers and not page.sources


def test_a_capture_without_memory_events_says_so() -> None:
    html = traceparse.load(REPO / "fixtures/no_memory")._repr_html_()
    page = _parse(html)
    assert "table" not in page.tags and "memory" in " ".join(page.text).lower()


def test_a_notebook_shows_the_profile(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    nbconvert = pytest.importorskip("nbconvert.preprocessors")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "import traceparse\n"
            f"traceparse.load({str(REPO / 'fixtures/layers_cnn')!r})"
        )
    ]
    executor = nbconvert.ExecutePreprocessor(timeout=300, kernel_name="python3")
    executor.preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    (output,) = [o for o in notebook.cells[0].outputs if o.get("output_type") == "execute_result"]
    html = output["data"]["text/html"]
    assert "Where the bytes in use at the peak come from" in html and "<script" not in html
    assert "conv_a" in html


def test_every_host_and_allocator_in_one_overview_the_fullest_flagged() -> None:
    from helpers.devices import many

    page = _parse(many()._repr_html_())
    rows = [r for r in page.rows if r and r[0] in ("GPU_0_bfc", "gpu_host_bfc")]
    assert len(rows) == 4
    flagged = [r for r in rows if r[-1] == "◀ fullest"]
    # worker-b's GPU holds 300 MiB of the same capacity: the fullest.
    assert len(flagged) == 1 and flagged[0][:2] == ["GPU_0_bfc", "worker-b"]
