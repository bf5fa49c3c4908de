"""Writing result files so that an interrupted or failed run never leaves a file that
looks complete, and checking output paths before a run rather than after it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import InputError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed into place.

    The file gets the mode a plain ``open(path, "w")`` would give it (0o666 less the
    umask), not the temporary file's 0o600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_out_dir(path: str | Path, flag: str = "--out") -> Path:
    """Check, before a long run, that ``path`` can be a writable directory, so that one that
    cannot is an :class:`InputError` naming ``flag`` instead of an ``OSError`` once the work
    is done. Missing directories are created to find out, then removed again: a rejected
    command line leaves nothing behind (the writers create them when they write)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError("command line", flag, f"a directory ({path} is a file)")
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)           # deepest first
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError("command line", flag, f"a directory that can be created; {path}: "
                         f"{e.strerror}") from None
    writable = os.access(path, os.W_OK | os.X_OK)
    for d in missing:
        try:
            d.rmdir()
        except OSError:
            break
    if not writable:
        raise InputError("command line", flag, f"a writable directory ({path} is not)")
    return path


def check_out_file(path: str | Path, flag: str = "--out") -> Path:
    """Check, before a run, that ``path`` can be written as a file: not a directory, in a
    directory that exists or can be created, writable (see :func:`check_out_dir`). Raises
    :class:`InputError` naming ``flag``."""
    text, path = str(path), Path(path)
    if path.is_dir() or text.endswith(os.sep):
        raise InputError("command line", flag, f"a file name ({path} is a directory)")
    check_out_dir(path.parent, flag)
    return path
