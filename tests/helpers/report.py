"""Profiles the report tests render, and readers of the Markdown they get."""

from __future__ import annotations

import dataclasses
from functools import cache

from conftest import FIXTURES

import traceparse
from traceparse import Profile

VERSION = "0.0.0-test"


HOSTILE = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "a|b`c``d|`",
    "**bold** [link](https://evil.example) ![i](https://evil.example/i.png)",
    "line\nbreak | cell\r\n# heading",
    "$x^2$ \\| back\\slash \\",
    "--> ]]> <!-- \" ' &amp;",
    "` leading backtick",
]


@cache
def keras_profile() -> Profile:
    return traceparse.load(FIXTURES / "keras_train")


@cache
def hostile_profile() -> Profile:
    """keras_train with every op renamed under a hostile name scope, and a hostile
    host, run, step marker name and diagnostic."""
    trace = traceparse.load(FIXTURES / "keras_train").traces[0]
    events = trace.events.copy()
    names = list(events["tf_op"].cat.categories)
    renamed = {n: f"{HOSTILE[i % len(HOSTILE)]}/{n}" for i, n in enumerate(names)}
    events["tf_op"] = events["tf_op"].cat.rename_categories(renamed)
    markers = trace.step_markers.copy()
    markers["name"] = markers["name"].astype(object).map(lambda _: HOSTILE[0]).astype("category")
    hostile = dataclasses.replace(
        trace,
        host=HOSTILE[1],
        events=events,
        step_markers=markers,
        op_types={renamed.get(k, k): f"{HOSTILE[3]}{v}" for k, v in trace.op_types.items()},
        diagnostics=[*trace.diagnostics, f"diagnostic {HOSTILE[0]} {HOSTILE[3]}"],
    )
    return Profile([hostile], run=HOSTILE[0])


def markdown_tokens(text: str) -> list[object]:
    from markdown_it import MarkdownIt

    return list(MarkdownIt("commonmark").enable("table").parse(text))


def flat(tokens: list[object]) -> list[object]:
    out: list[object] = []
    for token in tokens:
        out.append(token)
        out.extend(flat(list(getattr(token, "children", None) or [])))
    return out


def assert_tables_well_formed(text: str) -> int:
    """Every table row has as many cells as its header; returns the number of tables."""
    tables = header = cells = 0
    for token in flat(markdown_tokens(text)):
        kind = getattr(token, "type", "")
        if kind == "thead_open":
            tables += 1
            header = -1
        elif kind == "tr_open":
            cells = 0
        elif kind in ("th_open", "td_open"):
            cells += 1
        elif kind == "tr_close":
            if header == -1:
                header = cells
            assert cells == header, "a name split or merged table cells"
    return tables
