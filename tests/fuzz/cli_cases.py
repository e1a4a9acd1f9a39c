"""Hostile cases for the command line: a run directory copied from a fixture, one of
its files damaged (the capture or a record beside it), and one command over it.

Where ``mutations.py`` makes one hostile capture for the library, a CLI case is a
directory: ``a/plugins/profile/<run>/`` with the capture and its sidecars
(``<host>.variables.json``, ``.failure.json``, ``.sources.json.gz``,
``.batch.json``; a valid batch record is added to half the cases so its reader
is reached), and ``b/``, an undamaged copy of another fixture for the commands
that take two captures (``diff``, ``predict --with``). Then one of every command
(``COMMANDS``, ``serve`` through its WSGI routes) with arguments drawn from
valid and hostile values.

``make_cli_case(rng, root)`` writes the directories under ``root`` and returns
the command line; everything is drawn from ``rng``, so a case is replayed from
its seed.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz.mutations import (
    FIXTURES,
    HOSTILE_TEXT,
    INTERESTING_INTS,
    bitflip,
    delete,
    insert,
    overwrite,
    truncate,
    varint,
)
from fuzz.mutations import absurd as absurd_capture

# Fixtures with a record beside the capture come first in the draw (weights).
POOL: dict[str, int] = {
    "leak": 2,
    "eager_ops": 1,
    "no_memory": 1,
    "two_runs": 1,
    "legacy": 1,
    "keras_inventory": 2,
    "layers_sequential": 1,
    "xla_function": 1,
    "oom_profile_eager": 3,
    "oom_callback_graph": 3,
    "oom_run_eager": 2,
    "sources_jit": 3,
    "sources_callback": 2,
    "keras2_functional": 1,
    "batch_128": 1,
}

COMMANDS = (
    "summary",
    "report",
    "batch",
    "serve",
    "check",
    "baseline",
    "diff",
    "predict",
    "advise",
    "peak",
    "breakdown",
    "oom",
    "allocations",
    "ops",
    "scopes",
    "layers",
    "lines",
    "steps",
    "xla",
)

# JSON values a record should refuse or survive: past every integer type, not
# numbers at all, of the wrong type, text no encoder takes.
HOSTILE_VALUES: list[Any] = [
    *INTERESTING_INTS,
    10**30,
    -(10**30),
    2**64,
    -(2**63) - 1,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -0.0,
    0.5,
    True,
    False,
    None,
    "",
    "\udcff",
    "/x/\udcff.py",
    "\x00",
    [],
    {},
    [[]] * 50,
    *HOSTILE_TEXT,
]
# Numbers whose text alone is hostile: more digits than int() converts, exponents
# past a double.
HOSTILE_NUMBER_TEXT = ["1" + "0" * 5000, "1e400", "-1e400", "123456789" * 30, "1E+99999"]

HOSTILE_COUNTS = [
    "0",
    "-1",
    "1",
    "3",
    "64",
    "100000000000000000",
    str(2**63),
    str(2**64),
    "1" + "0" * 30,
    "1.5",
    "nan",
    "inf",
    "1e3",
    "True",
    "",
    "0x10",
    "٣",
]
HOSTILE_SIZES = [
    *("16GiB", "0", "-1GiB", "1e400GiB", "nanGiB", "infGiB", "99999999999999999999TiB", "1")
]
HOSTILE_PERCENT = ["90%", "0", "150%", "-5%", "nan", "inf%", "1e400%"]
PRECISIONS = ["mixed_float16", "mixed_bfloat16", "float32", "float64", "", "mixed_float16\x1b[31m"]
OPTIMIZERS = [
    *("sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad", "adafactor", "lion", "ADAM", "x")
]
REMATS = ["all", "dense", "dense,dense_1", ",", "a" * 300, "<script>", "all,all"]


@dataclass(frozen=True)
class CliCase:
    """One command line over a damaged run directory."""

    argv: list[str]
    fixture: str
    damaged: str  # which file was damaged, and how
    command: str


def _run_dir(fixture: str) -> Path:
    found = sorted(p.parent for p in (FIXTURES / fixture).rglob("*.xplane.pb"))
    found += sorted(p.parent for p in (FIXTURES / fixture).rglob("*.memory_profile.json.gz"))
    return found[0]


def _batch_record(rng: random.Random) -> bytes:
    size = rng.choice([16, 32, 64, 128])
    document = {
        "format": "traceparse.batch",
        "version": 1,
        "tensorflow": "2.21.0",
        "started_ns": 1_796_000_000_000_000_000,
        "stopped_ns": 1_796_000_001_000_000_000,
        "batch_size": size,
        "how": rng.choice(["given", "keras", "function"]),
        "steps": [[i, size] for i in range(rng.randint(0, 6))],
    }
    return json.dumps(document).encode()


def _slots(node: Any, found: list[tuple[Any, Any]]) -> None:
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        found.append((node, key))
        if isinstance(value, dict | list):
            _slots(value, found)


def hostile_json(rng: random.Random, text: bytes) -> bytes:
    """The JSON document ``text`` with random values replaced by hostile ones, keys
    dropped, or its text spliced with numbers and nesting no writer makes."""
    try:
        document = json.loads(text)
    except ValueError:
        return overwrite(rng, text)
    choice = rng.random()
    if choice < 0.65:
        slots: list[tuple[Any, Any]] = []
        _slots(document, slots)
        for _ in range(rng.randint(1, 4)):
            if not slots:
                break
            node, key = rng.choice(slots)
            if isinstance(node, dict) and rng.random() < 0.15:
                node.pop(key, None)
            else:
                node[key] = rng.choice(HOSTILE_VALUES)
        return json.dumps(document).encode("utf-8", "surrogatepass")
    if choice < 0.8:  # a number's text replaced by one no int or float holds
        out = json.dumps(document)
        digits = [i for i, c in enumerate(out) if c.isdigit() and not out[i - 1].isdigit()]
        if digits:
            at = rng.choice(digits)
            end = at
            while end < len(out) and out[end].isdigit():
                end += 1
            out = out[:at] + rng.choice(HOSTILE_NUMBER_TEXT) + out[end:]
        return out.encode("utf-8", "surrogatepass")
    if choice < 0.9:  # deep nesting in place of a value
        depth = rng.choice([100, 5_000, 200_000])
        out = json.dumps(document)
        at = out.find(":")
        if at < 0:
            return ("[" * depth + "]" * depth).encode()
        return (out[: at + 1] + "[" * depth + "]" * depth + "," + out[at + 1 :].lstrip()).encode()
    # many empty containers in a list the reader walks
    out = json.dumps(document)
    at = out.find("[")
    count = rng.choice([1_000, 200_000, 2_000_000])
    filler = "[]," * count
    return (out[: at + 1] + filler + out[at + 1 :]).encode() if at >= 0 else out.encode()


def _damage(rng: random.Random, path: Path) -> str:
    """Damage ``path`` in place; say how."""
    raw = path.read_bytes()
    name = path.name
    if name.endswith(".xplane.pb"):
        kind = rng.choice(["absurd", "absurd", "varint", "bitflip", "truncate"])
        mutate = {
            "absurd": absurd_capture,
            "varint": varint,
            "bitflip": bitflip,
            "truncate": truncate,
        }[kind]
        path.write_bytes(mutate(rng, raw))
        return f"{name}: {kind}"
    if name.endswith(".gz"):
        kind = rng.choice(["json", "json", "json", "gzip-bitflip", "gzip-truncate", "bytes"])
        if kind == "gzip-bitflip":
            path.write_bytes(bitflip(rng, raw))
        elif kind == "gzip-truncate":
            path.write_bytes(raw[: rng.randrange(max(1, len(raw)))])
        elif kind == "bytes":
            path.write_bytes(gzip.compress(overwrite(rng, gzip.decompress(raw)), mtime=0))
        else:
            path.write_bytes(gzip.compress(hostile_json(rng, gzip.decompress(raw)), mtime=0))
        return f"{name}: {kind}"
    kind = rng.choice(["json", "json", "json", "bytes", "truncate", "insert", "delete"])
    if kind == "json":
        path.write_bytes(hostile_json(rng, raw))
    else:
        mutate = {
            "bytes": overwrite,
            "truncate": truncate,
            "insert": insert,
            "delete": delete,
        }[kind]
        path.write_bytes(mutate(rng, raw))
    return f"{name}: {kind}"


class _Picker:
    """Draws argument values: one of the first ``valid`` of a list, or in a case of
    hostile arguments (a third of them: valid ones let the damaged files reach
    the analyses) half the time any."""

    def __init__(self, rng: random.Random, hostile: bool) -> None:
        self.rng, self.hostile = rng, hostile

    def __call__(self, values: list[str], valid: int) -> str:
        rng = self.rng
        return rng.choice(values if self.hostile and rng.random() < 0.5 else values[:valid])


def _arguments(
    rng: random.Random, pick: _Picker, command: str, a: str, b: str, out: Path
) -> list[str]:
    """The command line after the command's name (``out`` is a directory to write in)."""
    table_formats = ["table", "csv", "json", "parquet"]
    if command == "summary":
        argv = [a, "--format", rng.choice(["table", "json"])]
        if rng.random() < 0.3:
            argv += ["--top", pick(HOSTILE_COUNTS, 5)]
        return argv
    if command == "report":
        fmt = rng.choice(["md", "html", "json"])
        return [a, "--format", fmt, "-o", str(out / f"report.{fmt}")]
    if command == "serve":
        return [a]
    if command == "batch":
        return [a, "-o", str(out / "batch"), "-j", "1", "--reports", "md,json"]
    if command == "check":
        argv = [a, "--format", rng.choice(["text", "json"]), "--junit", str(out / "junit.xml")]
        if rng.random() < 0.7:
            argv += ["--max-peak", pick(HOSTILE_SIZES, 1)]
        if rng.random() < 0.3:
            argv += ["--max-utilisation", pick(HOSTILE_PERCENT, 1)]
        if rng.random() < 0.3:
            argv += ["--no-leaks"]
        if rng.random() < 0.3:
            argv += ["--allow-empty"]
        return argv
    if command == "baseline":
        return [a, "-o", str(out / "baseline.json")]
    if command == "diff":
        first, second = (a, b) if rng.random() < 0.5 else (b, a)
        fmt = rng.choice(["table", "md", "html", "json"])
        argv = [first, second, "--format", fmt, "--by", rng.choice(["op", "scope"])]
        if fmt == "html":
            argv += ["-o", str(out / "diff.html")]
        return argv
    if command == "predict":
        argv = [a, "--format", rng.choice(["table", "json"])]
        what = rng.random()
        if what < 0.4 or rng.random() < 0.3:
            argv += ["--batch", pick(HOSTILE_COUNTS, 5)]
        if 0.4 <= what < 0.6 or rng.random() < 0.2:
            argv += ["--precision", pick(PRECISIONS, 3)]
        if 0.6 <= what < 0.8 or rng.random() < 0.2:
            argv += ["--optimizer", pick(OPTIMIZERS, 8)]
        if what >= 0.8 or rng.random() < 0.2:
            argv += ["--remat", pick(REMATS, 2)]
        if rng.random() < 0.25:
            argv += ["--from-batch", pick(HOSTILE_COUNTS, 5)]
        if rng.random() < 0.25:
            argv += ["--with", b]
            if rng.random() < 0.5:
                argv += ["--with-batch", pick(HOSTILE_COUNTS, 5)]
        if rng.random() < 0.25:
            argv += ["--capacity", pick(HOSTILE_SIZES, 1)]
        if rng.random() < 0.3:
            argv += ["-o", str(out / "predict.html")]
        return argv
    if command == "advise":
        fmt = rng.choice(["table", "json", "md", "html"])
        argv = [a, "--format", fmt]
        if fmt in ("md", "html") or rng.random() < 0.2:
            argv += ["-o", str(out / f"advise.{fmt if fmt != 'table' else 'md'}")]
        if rng.random() < 0.3:
            argv += ["--from-batch", pick(HOSTILE_COUNTS, 5)]
        if rng.random() < 0.2:
            argv += ["--capacity", pick(HOSTILE_SIZES, 1)]
        return argv
    if command == "oom":
        return [a, "--format", rng.choice(["table", "json"])]
    # The table commands.
    fmt = rng.choice(table_formats)
    argv = [a, "--format", fmt]
    if fmt in ("csv", "parquet") or rng.random() < 0.2:
        argv += ["-o", str(out / f"{command}.{fmt if fmt != 'table' else 'txt'}")]
    if rng.random() < 0.3:
        argv += ["--top", pick(HOSTILE_COUNTS, 5)]
    extras: dict[str, list[list[str]]] = {
        "peak": [
            ["--per-allocator"],
            ["--at", "first"],
            ["--at", "last"],
            ["--at", "step", pick(HOSTILE_COUNTS, 3)],
        ],
        "breakdown": [["--by", "role"], ["--by", "layer"], ["--by", "holder"], ["--by", "part"]],
        "allocations": [["--live"]],
        "scopes": [["--depth", pick(HOSTILE_COUNTS, 5)], ["--as-written"]],
        "layers": [["--by-replica"], ["--depth", pick(HOSTILE_COUNTS, 5)]],
        "lines": [["--stack"], ["--flame", str(out / "flame.html")]],
        "steps": [[]],
        "xla": [["--program", rng.choice(HOSTILE_TEXT)] if pick.hostile else []],
        "ops": [["--reverse"]],
    }
    if rng.random() < 0.6:
        argv += rng.choice(extras[command])
    return argv


def make_cli_case(rng: random.Random, root: Path, command: str | None = None) -> CliCase:
    """Write a damaged run directory (``root/a``), an intact other one (``root/b``)
    and an output directory (``root/out``); return the command line over them."""
    names = list(POOL)
    fixture = rng.choices(names, [POOL[n] for n in names])[0]
    # Half the time b is the same program (diff, predict --with get past "another program").
    other = fixture if rng.random() < 0.5 else rng.choice(names)
    a_run = root / "a" / "plugins" / "profile" / "run"
    b_run = root / "b" / "plugins" / "profile" / "run"
    shutil.copytree(_run_dir(fixture), a_run)
    shutil.copytree(_run_dir(other), b_run)
    (root / "out").mkdir()
    captures = sorted(a_run.glob("*.xplane.pb")) or sorted(a_run.iterdir())
    host = captures[0].name.split(".")[0]
    if rng.random() < 0.5:
        (a_run / f"{host}.batch.json").write_bytes(_batch_record(rng))
    files = sorted(p for p in a_run.iterdir() if p.is_file())
    # A record beside the capture is damaged more often than the capture: the
    # capture's own damage is what the library fuzzing covers.
    sidecars = [p for p in files if not p.name.endswith((".xplane.pb", ".memory_profile.json.gz"))]
    target = rng.choice(sidecars) if sidecars and rng.random() < 0.75 else rng.choice(files)
    damaged = _damage(rng, target) if rng.random() < 0.95 else "nothing"
    command = command or rng.choice(COMMANDS)
    pick = _Picker(rng, rng.random() < 1 / 3)
    a = str(root / "a")
    argv = [command, *_arguments(rng, pick, command, a, str(root / "b"), root / "out")]
    return CliCase(argv=argv, fixture=f"{fixture} (b: {other})", damaged=damaged, command=command)
