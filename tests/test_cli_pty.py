"""The table commands in a real pseudo-terminal of 60 to 120 columns, and the fitting rules.

One child process per width runs every command on the fixtures with its
stdout on a pty whose window size is set with TIOCSWINSZ (no COLUMNS hint), so
rich and the plain path find the width as they would in a user's terminal.
The same child writes each table as CSV (full names, same rows) to compare.
"""

from __future__ import annotations

import csv
import io
import os
import re
import select
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from traceparse.output.fit import fit_columns, render_fitted, wrap_header

REPO = Path(__file__).resolve().parent.parent

pty = pytest.importorskip("pty")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

# (command line, name column) on the fixtures.
COMMANDS: list[tuple[list[str], str | None]] = [
    (["layers", "fixtures/layers_cnn"], "layer"),
    (["ops", "fixtures/layers_cnn"], "op"),
    (["scopes", "fixtures/layers_cnn"], "scope"),
    (["steps", "fixtures/keras_train"], None),
    (["xla", "fixtures/xla_keras"], "program"),
    (["xla", "fixtures/xla_keras", "--program", "one_step_on_data"], "instruction"),
    (["peak", "fixtures/layers_cnn"], "op"),
]
MARK = "@@@ "

# --quiet: no progress display on the pty's stderr, which a read slower than a
# second (a busy machine) would draw between the tables.
CHILD = """
import sys
from traceparse.cli.app import main
commands = {commands!r}
for i, argv in enumerate(commands):
    print("{mark}tty", i, flush=True)
    main([*argv, "--quiet", "--no-color", "--top", "20"])
    sys.stdout.flush()
    print("{mark}csv", i, flush=True)
    main([*argv, "--quiet", "--format", "csv", "--top", "20"])
    sys.stdout.flush()
"""


def _run_in_pty(columns: int, code: str | None = None) -> str:
    if code is None:
        code = CHILD.format(commands=[argv for argv, _ in COMMANDS], mark=MARK)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PYTHONPATH"] = str(REPO)
    env["TERM"] = "xterm"
    master, slave = pty.openpty()
    # The window size is set before the child starts, as a terminal emulator does.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave, cwd=REPO, env=env
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 300)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert child.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def _sections(text: str) -> dict[tuple[str, int], str]:
    parts: dict[tuple[str, int], str] = {}
    current: tuple[str, int] | None = None
    for line in text.split("\n"):
        if line.startswith(MARK):
            kind, index = line[len(MARK) :].split()
            current = (kind, int(index))
            parts[current] = ""
        elif current is not None:
            parts[current] += line + "\n"
    return parts


def _shown(name: str, text: str) -> bool:
    """``name`` whole, cut in the middle with at least its first and last 4 characters,
    or cut at scopes: whole scopes in order, its op last, each run of dropped ones
    ``…`` (``gradient_tape/…/dense/…/MatMul``, ``…/adam/Sqrt``: output/cells.py
    ``shorten``)."""
    if name in text:
        return True
    for match in re.finditer(r"(\S*)…(\S+)", text):
        head, tail = match.group(1), match.group(2)
        if name.endswith(tail) and len(head) >= min(4, len(name)) and name.startswith(head):
            return True
        if _cut_at_scopes(name, match.group(0)):
            return True
    return False


def _cut_at_scopes(name: str, cut: str) -> bool:
    """Whether ``cut`` is ``name`` with runs of whole scopes replaced by ``…``, the op kept."""
    parts, kept = name.split("/"), cut.split("/")
    if kept[-1] != parts[-1] or "…" not in kept:
        return False
    at = 0
    for piece in kept:
        if piece == "…":
            continue
        head, _, tail = piece.partition("…")  # a layer too long is cut in its middle
        found = [
            i
            for i in range(at, len(parts))
            if parts[i] == piece or ("…" in piece and _ends(parts[i], head, tail))
        ]
        if not found:
            return False
        at = found[0] + 1
    return True


def _ends(part: str, head: str, tail: str) -> bool:
    return len(part) > len(head) + len(tail) and part.startswith(head) and part.endswith(tail)


# A cell holding a cut number: digits (and a unit's start) then the ellipsis.
_CUT_NUMBER = re.compile(r"(^|\s)[-+]?[\d.,]+ ?[KMGTP]?i?B?…(\s|$)")


@pytest.mark.parametrize("columns", [60, 80, 100, 120])
def test_tables_fit_a_terminal(columns: int) -> None:
    parts = _sections(_run_in_pty(columns))
    for index, (argv, name_column) in enumerate(COMMANDS):
        shown = parts[("tty", index)]
        lines = shown.rstrip("\n").split("\n")
        assert "\x1b[" not in shown, argv
        wide = [line for line in lines if len(line) > columns]
        assert not wide, (argv, columns, wide)
        assert not any(_CUT_NUMBER.search(line) for line in lines), (argv, shown)
        rows = list(csv.DictReader(io.StringIO(parts[("csv", index)])))
        assert rows, argv
        if name_column is not None:
            header_lines = [line for line in lines if line.startswith(name_column)]
            assert header_lines, (argv, shown)  # the name column leads the table
            for row in rows:
                name = row[name_column] or "(no op recorded)"
                assert _shown(name, shown), (argv, columns, name)
        hidden = [line for line in lines if line.startswith("Not shown at")]
        if hidden:
            note = " ".join(lines[lines.index(hidden[0]) :])
            assert f"Not shown at {columns} columns:" in note
            assert "--columns" in note and "--wide" in note
            named = note.split(":", 1)[1].split("(")[0].replace(",", " ").split()
            assert named and all(n in rows[0] or f"{n}_ps" in rows[0] for n in named), note


# -- the fitting rules on hand-made tables -------------------------------------


def test_numbers_stay_whole_and_columns_drop_from_the_right() -> None:
    headers = ["op", "allocated_bytes", "dtype", "live_at_peak_bytes", "shape"]
    long_name = "gradient_tape/model/very_long_scope_name/conv2d/Conv2DBackpropInput"
    rows = [
        [long_name, "1.1 GiB", "float32", "384 MiB", "[128,256,256,64]"],
        ["adam/Mul_19", "96 MiB", "float32", "0 B", "[]"],
    ]
    right = [False, True, False, True, False]
    layout = fit_columns(headers, rows, right, 70)
    assert layout.shown[0] == 0 and layout.hidden == [4]  # the shape goes first
    head, body = render_fitted(headers, rows, right, layout)
    assert all(len(line) <= 70 for line in head + body)
    assert "1.1 GiB" in body[1] and "384 MiB" in body[1]
    first = body[1].split()[0]
    # Issue 52: the layer outlasts the direction (output/cells.py shorten).
    assert _shown(long_name, first) and first.endswith("/Conv2DBackpropInput") and "…" in first
    narrow = fit_columns(headers, rows, right, 46)
    assert narrow.shown == [0, 1] and narrow.hidden == [2, 3, 4]


def test_the_name_column_is_kept_even_when_it_is_not_first() -> None:
    headers = ["count", "bytes", "op"]
    rows = [["3", "12 MiB", "model/dense/MatMul"]]
    layout = fit_columns(headers, rows, [True, True, False], 20, key=2)
    assert 2 in layout.shown and layout.hidden
    _, body = render_fitted(headers, rows, [True, True, False], layout)
    assert all(len(line) <= 20 for line in body)


def test_headers_wrap_at_underscores() -> None:
    assert wrap_header("live_at_peak_bytes", 12) == ["live_at_", "peak_bytes"]
    assert wrap_header("op", 10) == ["op"]
    assert wrap_header("activation_bytes", 11) == ["activation_", "bytes"]


# -- issue 52: what each command is for survives 80 columns --------------------

PLAIN_CHILD = """
import sys
from traceparse.cli.app import main
for i, argv in enumerate({commands!r}):
    print("{mark}tty", i, flush=True)
    main([*argv, "--quiet", "--no-color"])
    sys.stdout.flush()
"""
AT_80 = [
    ["ops", "fixtures/predict_partial_64", "--top", "40"],
    ["layers", "fixtures/layers_cnn"],
    ["diff", "fixtures/batch_128", "fixtures/batch_256"],
    ["summary", "fixtures/sources_fit"],
]


@pytest.fixture(scope="module")
def at_80() -> list[str]:
    parts = _sections(_run_in_pty(80, PLAIN_CHILD.format(commands=AT_80, mark=MARK)))
    shown = [parts[("tty", i)] for i in range(len(AT_80))]
    for text in shown:
        assert all(len(line) <= 80 for line in text.split("\n")), text
    return shown


def test_ops_keep_the_layer_scope_at_80_columns(at_80: list[str]) -> None:
    # Was sequential_1_1/…/MaxPool2d: the model's scope kept, the layer dropped.
    ops = at_80[0]
    # gradient_tape/functional_1/max_pooling2d_1/MaxPool2d/MaxPoolGrad: was
    # gradient_tape/…/MaxPool2d/MaxPoolGrad, no layer.
    assert "…/max_pooling2d_1/…/MaxPoolGrad" in ops, ops
    # gradient_tape/functional_1/conv2d_1/convolution/Conv2DBackpropInput
    assert "…/conv2d_1/…/Conv2DBackpropInput" in ops, ops


def test_layers_keep_their_role_columns_at_80_columns(at_80: list[str]) -> None:
    header = " ".join(line for line in at_80[1].split("\n")[1:3])
    for role in ("activation_", "gradient_", "optimizer_", "live_at_"):
        assert role in header, at_80[1]
    hidden = at_80[1].split("Not shown at 80 columns:")[1]
    assert "allocated_bytes" in hidden and "largest_tensor" in hidden


def test_diff_shows_both_sides_of_a_shape_at_80_columns(at_80: list[str]) -> None:
    # Was float32…56,2048]: the batch that changed cut away.
    diff = at_80[2]
    assert "float32[128→256,2048]" in diff and "float32[128→256,512]" in diff, diff
    assert "float32…" not in diff


def test_the_summary_keeps_the_source_column_at_80_columns(at_80: list[str]) -> None:
    tensors = at_80[3].split("Largest tensors live at the peak")[1].split("\n\n")[0]
    assert "Source" in tensors.split("\n")[1], tensors
    assert "…/sources_model.py:60 train" in tensors
    assert "Source" not in tensors.split("Not shown at 80 columns:")[1]


def test_the_roles_view_keeps_its_bytes_role_and_layer_at_80_columns() -> None:
    """``xla --program NAME --roles`` is a breakdown: on a narrow terminal the op's
    long name gives way, not the role and layer the view is for."""
    argv = ["xla", "fixtures/jax_optax_cpu", "--program", "jit_train_step", "--roles"]
    code = CHILD.format(commands=[argv], mark=MARK)
    shown = _sections(_run_in_pty(80, code))[("tty", 0)]
    lines = shown.split("\n")
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    header = lines[rule - 1].split()  # a header may wrap at its underscore above
    assert header == ["instruction", "bytes", "role", "layer"], shown
    assert "optimizer_state" in shown and all(len(line) <= 80 for line in shown.split("\n"))
