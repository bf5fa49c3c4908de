"""rnicsim.hw's choice between the compiled core and the pure-Python model (the results of
both are compared case by case in test_fingerprint.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES

import rnicsim.hw as hw


def _child(code: str, cwd=None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "always", "-c", code], cwd=cwd,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, check=True)


def test_pure_python_forced_loads_the_py_files_without_a_warning():
    """RNICSIM_PURE_PYTHON=1: every compiled module comes from its .py file, silently."""
    out = _child("import rnicsim.hw as h, importlib\n"
                 "print(h.PURE_PYTHON, [importlib.import_module('rnicsim.hw.' + m).__file__"
                 "[-3:] for m in h.COMPILED])", RNICSIM_PURE_PYTHON="1")
    assert out.stdout.strip() == f"True {['.py'] * len(hw.COMPILED)}"
    assert out.stderr == ""


def test_not_built_names_the_missing_or_stale_extension(tmp_path, monkeypatch):
    """The reason for running pure Python names the first module without an extension, or
    the extension older than its source; None when every one is built and fresh."""
    monkeypatch.setattr(hw, "_HERE", tmp_path)
    monkeypatch.setattr(hw, "COMPILED", ("calendar",))
    src = tmp_path / "calendar.py"
    src.write_text("")
    assert hw._not_built() == "rnicsim.hw.calendar is not compiled"
    ext = tmp_path / f"calendar{EXTENSION_SUFFIXES[0]}"
    ext.write_text("")
    os.utime(src, (1000, 1000))
    os.utime(ext, (2000, 2000))
    assert hw._not_built() is None
    os.utime(src, (3000, 3000))
    assert hw._not_built() == f"{ext.name} is older than its source"


def test_a_stale_build_runs_pure_python_with_one_warning(tmp_path):
    """A package whose extension is older than its source imports the .py file and warns
    exactly once, saying why and how to build."""
    pkg = tmp_path / "rnicsim" / "hw"
    pkg.mkdir(parents=True)
    (tmp_path / "rnicsim" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(open(hw.__file__).read())
    ext = pkg / f"calendar{EXTENSION_SUFFIXES[0]}"
    ext.write_text("")
    (pkg / "calendar.py").write_text("WHICH = 'py'\n")
    os.utime(ext, (1000, 1000))
    out = _child("import rnicsim.hw.calendar as c, rnicsim.hw.calendar\nprint(c.WHICH)",
                 cwd=tmp_path, PYTHONPATH=str(tmp_path), RNICSIM_PURE_PYTHON="")
    assert out.stdout.strip() == "py"
    lines = [ln for ln in out.stderr.splitlines() if "RuntimeWarning" in ln]
    assert lines == [ln for ln in lines if f"{ext.name} is older than its source" in ln]
    assert len(lines) == 1, out.stderr
    assert "install a C compiler (gcc) and run `pip install -e .` again" in lines[0]
