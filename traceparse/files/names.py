"""Names of files that are not UTF-8, made printable."""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str) -> str:
    """``text`` with the bytes of a file name that were not UTF-8 as ``\\xNN``.

    Python reads such names with ``surrogateescape``; the lone surrogates that
    leaves cannot be encoded, printed, or stored in a table, so names shown or
    stored use this form (the path itself keeps the bytes, to open the file).
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")
