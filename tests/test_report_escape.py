"""Escaping for reports, checked by parsing the output with a CommonMark + GFM
tables parser (markdown-it, which splits table cells as cmark-gfm does)."""

from __future__ import annotations

import html

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceparse.report.escape import html_text, md_code, md_text, one_line

markdown_it = pytest.importorskip("markdown_it")

TRICKY = [
    "`",
    "``",
    "a`b",
    "`a`",
    " a ",
    "a|b",
    "a\\|b",
    "\\",
    "|",
    "<script>alert(1)</script>",
    "[x](https://evil.example)",
    "![x](https://evil.example/x.png)",
    "**b** _i_ ~~s~~",
    "# heading",
    "- item",
    "1. item",
    "> quote",
    "&amp; &lt;",
    "$x$",
    "line\nbreak",
    "tab\there",
    "----",
    "===",
    "+ x",
    "  leading and trailing  ",
    "a_b_c",
    "_a_ __b__ a__b__c __init__",
    "x_*y*_z",
]

# Any text, heavy on the characters Markdown acts on.
names = st.text(
    alphabet=st.sampled_from(list("`|\\*_[]()<>!#+-=.&;$~:/@ \n\t0123456789ax"))
    | st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)


def parse(text: str) -> list[object]:
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return list(md.parse(text))


def inline_children(tokens: list[object]) -> list[object]:
    out: list[object] = []
    for token in tokens:
        out.extend(getattr(token, "children", None) or [])
    return out


def cells(row: str) -> list[list[object]]:
    """Parse a one-row table with ``row`` as the body; the inline tokens of each cell."""
    tokens = parse("| a | b |\n| --- | --- |\n" + row + "\n")
    body, current, inside = [], [], False
    for token in tokens:
        kind = getattr(token, "type", "")
        if kind == "tbody_open":
            inside = True
        if inside and kind == "td_open":
            current = []
        if inside and kind == "inline":
            current = list(getattr(token, "children", None) or [])
        if inside and kind == "td_close":
            body.append(current)
    return body


def check_code_cell(name: str) -> None:
    row = f"| {md_code(name)} | x |"
    found = cells(row)
    assert len(found) == 2, (name, row)
    expected = one_line(name)
    if not expected:
        return
    kinds = [getattr(t, "type", "") for t in found[0]]
    assert kinds == ["code_inline"], (name, row, kinds)
    assert getattr(found[0][0], "content", None) == expected, (name, row)


def check_text(text: str) -> None:
    source = md_text(text)
    children = inline_children(parse(source))
    kinds = {getattr(t, "type", "") for t in children}
    assert kinds <= {"text", "softbreak"}, (text, source, kinds)
    rendered = "".join(str(getattr(t, "content", "")) for t in children)
    assert rendered == one_line(text).strip(), (text, source)


@pytest.mark.parametrize("name", TRICKY)
def test_code_spans_keep_names_in_their_cell(name: str) -> None:
    check_code_cell(name)


@pytest.mark.parametrize("text", TRICKY)
def test_text_renders_verbatim(text: str) -> None:
    check_text(text)


@settings(max_examples=300, deadline=None)
@given(names)
def test_any_name_stays_in_its_code_span_and_cell(name: str) -> None:
    check_code_cell(name)


@settings(max_examples=300, deadline=None)
@given(names)
def test_any_text_renders_verbatim(text: str) -> None:
    check_text(text)


def test_text_in_a_table_cell_stays_there() -> None:
    for text in TRICKY:
        found = cells(f"| {md_text(text)} | x |")
        assert len(found) == 2, text


def test_html_text_escapes_markup_and_quotes() -> None:
    hostile = "<img src=x onerror=\"alert('1')\">&"
    escaped = html_text(hostile)
    assert "<" not in escaped and '"' not in escaped and "'" not in escaped
    assert html.unescape(escaped) == hostile


def test_one_line_joins_lines_and_shows_controls_as_escapes() -> None:
    # A control character is shown (as in the terminal), never dropped or obeyed.
    assert one_line("a\r\nb\u2028c\x1bd\u202ee") == "a b c\\x1bd\\u202ee"


# -- invisible characters and length caps (docs/robustness.md) -----------------------

INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u200b", "\u200d", "\u2060", "\ufeff", "\x1b", "\x07"]


@pytest.mark.parametrize("char", INVISIBLE)
def test_invisible_and_control_characters_are_escapes_in_every_form(char: str) -> None:
    name = f"cod{char}exe.doc"
    shown = f"cod\\{'x' if ord(char) < 256 else 'u'}{ord(char):0{2 if ord(char) < 256 else 4}x}"
    for escaped in (html_text(name), md_code(name), md_text(name), one_line(name)):
        assert char not in escaped
        assert shown in escaped.replace("\\\\", "\\")
