"""Hardware components; the per-verb path may run compiled.

The modules named in ``COMPILED`` are built by ``setup.py`` as C extensions (Cython, pure-
Python mode) from the very ``.py`` files here, typed by the ``.pxd`` beside each: the
Python source is the one model, and both builds give byte-identical results
(``tests/unit/test_fingerprint.py`` compares them). One exception: the event heap is
``heap.pyx`` compiled, a C implementation beside its pure-Python reference ``heap.py``
(``tests/unit/test_heap.py`` compares their order). This package decides once, on first
import, which build runs:

- ``RNICSIM_PURE_PYTHON=1`` in the environment: the ``.py`` files, silently (for the
  differential test and for debugging);
- every listed module has an extension at least as new as its ``.py``, ``.pyx`` and
  ``.pxd``: the extensions;
- otherwise (no C compiler at install time, or a ``.py`` edited since the build): the
  ``.py`` files, with one ``RuntimeWarning`` saying why and how to build.

All or nothing: a compiled module may call another's C methods, which needs that one
compiled too. ``PURE_PYTHON`` tells which build this process runs.
"""
from __future__ import annotations

import os
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import spec_from_file_location
from pathlib import Path

# Modules of the per-verb path that setup.py compiles (it reads this tuple).
COMPILED = ("calendar", "heap", "link", "pcie", "cache", "host", "cq", "qp", "arbiter", "qpc", "pu",
            "atomic", "completer", "requester", "responder")

_HERE = Path(__file__).resolve().parent


def _not_built() -> str | None:
    """Why the compiled core cannot be used (None when it can)."""
    for name in COMPILED:
        built = [p for p in (_HERE / (name + s) for s in EXTENSION_SUFFIXES) if p.exists()]
        if not built:
            return f"rnicsim.hw.{name} is not compiled"
        src = max((_HERE / f"{name}{x}").stat().st_mtime for x in (".py", ".pyx", ".pxd")
                  if (_HERE / f"{name}{x}").exists())
        if built[0].stat().st_mtime < src:
            return f"{built[0].name} is older than its source"
    return None


class _PureFinder:
    """Import finder that loads the ``.py`` file of a compiled module (it sits before the
    default finders, which prefer an extension module to a source file)."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        pkg, _, name = fullname.rpartition(".")
        if pkg != __name__ or name not in COMPILED:
            return None
        return spec_from_file_location(fullname, _HERE / f"{name}.py")


PURE_PYTHON = os.environ.get("RNICSIM_PURE_PYTHON", "") == "1"
if not PURE_PYTHON:
    _why = _not_built()
    if _why is not None:
        PURE_PYTHON = True
        warnings.warn(f"rnicsim: running the pure-Python model ({_why}): same results, "
                      "slower; to build the compiled core install a C compiler (gcc) and "
                      "run `pip install -e .` again", RuntimeWarning, stacklevel=2)
if PURE_PYTHON:
    sys.meta_path.insert(0, _PureFinder())
