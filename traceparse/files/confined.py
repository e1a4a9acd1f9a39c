"""Write and delete inside a directory of the tool's own only through real directories.

A batch's OUTDIR holds only what the batch made, but anyone who can write
there can plant a symbolic link: ``OUTDIR/captures/<name>`` pointing at another
directory, or ``OUTDIR/summary.md`` at someone's file. Followed, the next batch
would replace or delete files in the link's target. So below the directory the
user named, every level is checked with ``lstat``: a link (or a FIFO, a
device) that the tool did not make is removed (only the link itself, never
what it names) and a real directory or file takes its place.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["own_file", "real_directory"]


def real_directory(root: str, *parts: str) -> str:
    """``root/parts...``, each level made a real directory: created when missing, a
    link or other non-directory in its place removed first. ``root`` itself (the
    directory the user named) may be a link. Raises ``OSError`` when a level
    cannot be made (a regular file is in the way: it is left alone)."""
    path = root
    for part in parts:
        path = os.path.join(path, part)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISDIR(info.st_mode):
            if stat.S_ISREG(info.st_mode):
                raise NotADirectoryError(20, "a file is in the way", path)
            os.unlink(path)  # a link, a FIFO, a socket: only the entry goes
            info = None
        if info is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path)
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise NotADirectoryError(20, "not a real directory", path)
    return path


def own_file(path: str) -> str:
    """``path``, with a link, FIFO, device or socket at it removed (the entry, not what
    it names), so that writing it makes a regular file there; returns ``path``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        os.unlink(path)
    return path
