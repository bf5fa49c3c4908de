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


def test_the_calendar_search_is_bisect_right():
    """calendar._after and _before, in the compiled build searches on C doubles (pure
    Python uses bisect itself), give bisect_right's and bisect_left's index for probes
    below, between, on (repeated values) and above the items, and 0 in an empty array."""
    from bisect import bisect_left, bisect_right

    from rnicsim.hw.calendar import _after, _before, doubles
    a = [1.0, 2.5, 2.5, 2.5, 4.0, 7.25, 7.25, 9.0]
    d = doubles(a)
    probes = [0.0, 1.0, 1.5, 2.5, 3.0, 4.0, 7.25, 8.0, 9.0, 10.0, -1e300, 1e300]
    assert [_after(d, x) for x in probes] == [bisect_right(a, x) for x in probes]
    assert [_after(d, x) for x in probes] == [0, 1, 1, 4, 4, 5, 7, 7, 8, 8, 0, 8]
    assert [_before(d, x) for x in probes] == [bisect_left(a, x) for x in probes]
    assert [_before(d, x) for x in probes] == [0, 0, 1, 1, 4, 4, 5, 7, 7, 8, 0, 8]
    assert _after(doubles([]), 3.0) == _before(doubles([]), 3.0) == 0


def test_a_nic_keeps_its_state_in_declared_fields():
    """In the compiled build every attribute an Rnic sets is a field its parts declare
    (rnicsim/hw/qpc.pxd): a NIC has no __dict__ entries, even after traffic. (One there
    would make each call of one part into another look the method up by name again.)"""
    if hw.PURE_PYTHON:
        import pytest
        pytest.skip("the pure-Python model keeps a NIC's state in its __dict__")
    from rnicsim.cluster import Cluster
    from rnicsim.profile import load_profile
    from rnicsim.sim import Simulation
    from rnicsim.verbs import READ, Context, WorkRequest
    sim = Simulation(1)
    cl = Cluster(sim, load_profile("cx4-edr"), 2, 1)
    ctx = [Context(cl, i, 0, cl.nodes[i].thread(0)) for i in range(2)]
    qa = ctx[0].create_qp("RC", ctx[0].create_cq())
    qb = ctx[1].create_qp("RC", ctx[1].create_cq())
    qa.connect(qb)
    mr = ctx[1].reg_mr(4096)
    qa.post_send([WorkRequest(READ, 64, "r", True, False, None, 0, mr.rkey, 0)])
    sim.run()
    assert [n.counters["qpc_miss"] for n in cl.nics] == [1, 1]   # the READ went through
    assert [vars(n) for n in cl.nics] == [{}, {}]
