"""A real sources record (``sources_fit``'s) to damage, and a capture to put it beside."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from conftest import FIXTURES

SOURCE = next((FIXTURES / "sources_fit").rglob("*.xplane.pb")).parent
IGNORED = "the source lines were ignored"


def real_record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        gzip.decompress((SOURCE / "localhost.sources.json.gz").read_bytes())
    )
    return data


def capture_with(tmp_path: Path, data: bytes) -> Path:
    """A copy of ``sources_fit`` whose sources record is ``data``; returns its logdir."""
    run = tmp_path / "logs" / "plugins" / "profile" / SOURCE.name
    shutil.copytree(SOURCE, run)
    (run / "localhost.sources.json.gz").write_bytes(data)
    return tmp_path / "logs"


def packed(document: Any) -> bytes:
    return gzip.compress(json.dumps(document).encode())
