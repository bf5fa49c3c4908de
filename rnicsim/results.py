"""Writing result files so that an interrupted or failed run never leaves a file that
looks complete."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
