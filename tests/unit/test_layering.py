"""Rule of the rooms (ARCHITECTURE.md), checked on the source with ``ast``.

- protocols/ and workloads/ never import ``rnicsim.hw`` (they see verbs, the runtime and
  the clock) and never reach into private state: no ``._hw`` or ``._cq`` (the hardware
  behind a verbs handle), no ``env._now`` or ``env._eid`` (the SimPy environment's
  clock and event ids; ``Simulation.now`` and ``Simulation.events_scheduled`` are the
  public ones), in any spelling (``getattr(x, "_hw")`` too);
- the kernel (``rnicsim/``) never imports protocols or workloads (they register
  themselves as plugins);
- protocols never import workloads;
- ``rnicsim/hw`` never imports protocols, workloads, the verbs API or the scenario schema.

Imports are resolved to absolute module names (relative imports included), and
``from a import b`` counts as importing both ``a`` and ``a.b``.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SOFTWARE_FORBIDDEN = ("rnicsim.hw",)
HW_FORBIDDEN = ("protocols", "workloads", "rnicsim.verbs", "rnicsim.scenario")
KERNEL_FORBIDDEN = ("protocols", "workloads")
PROTOCOLS_FORBIDDEN = ("workloads",)
# Private attributes software must not touch, wherever they are read or written from.
PRIVATE_ANYWHERE = ("_hw", "_cq")
# Private attributes of the SimPy environment (``env`` or ``<x>.env``).
PRIVATE_OF_ENV = ("_now", "_eid")
# Files of protocols/ and workloads/ still allowed to use the private names above while
# they are being moved onto the facade, with the reason; empty: every file is clean.
PRIVATE_ALLOWED: dict[str, str] = {}


def _package_of(path: Path) -> str:
    """Dotted package containing ``path`` (``rnicsim/hw/rnic.py`` -> ``rnicsim.hw``)."""
    rel = path.resolve().relative_to(REPO).with_suffix("")
    return ".".join(rel.parts[:-1])   # a module and an __init__ both live in their folder


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    base = package.split(".") if package else []
    if level - 1 > len(base):
        return module or ""
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imported_modules(source: str, package: str = "", filename: str = "<src>"
                     ) -> list[tuple[int, str]]:
    """Every ``(line, module)`` the source may import, as absolute dotted names.

    Covers ``import a.b``, ``from a.b import c`` (``a.b`` and ``a.b.c``), relative forms
    resolved against ``package``, and ``importlib.import_module("...")``/``__import__("...")``
    with a literal name.
    """
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node.module, node.level, package)
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}" if mod else a.name) for a in node.names
                    if a.name != "*"]
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str):
                out.append((node.lineno, arg.value))
    return out


def violations(source: str, forbidden: tuple[str, ...], package: str = "",
               filename: str = "<src>") -> list[str]:
    """``"file:line imports module"`` for each import of a ``forbidden`` module (or below)."""
    bad = []
    for line, mod in imported_modules(source, package, filename):
        if any(mod == f or mod.startswith(f + ".") for f in forbidden):
            bad.append(f"{filename}:{line} imports {mod}")
    return sorted(set(bad))


def private_uses(source: str, filename: str = "<src>") -> list[str]:
    """``"file:line uses name"`` for each read or write of a private name of
    ``PRIVATE_ANYWHERE`` (on any object) or ``PRIVATE_OF_ENV`` (on ``env`` or ``x.env``),
    including ``getattr``/``setattr``/``hasattr`` with the name as a literal."""
    bad = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute):
            v = node.value
            on_env = (isinstance(v, ast.Name) and v.id == "env") or \
                (isinstance(v, ast.Attribute) and v.attr == "env")
            if node.attr in PRIVATE_ANYWHERE or (on_env and node.attr in PRIVATE_OF_ENV):
                bad.append(f"{filename}:{node.lineno} uses .{node.attr}")
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and \
                isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "hasattr"):
            name = node.args[1]
            if isinstance(name, ast.Constant) and \
                    name.value in PRIVATE_ANYWHERE + PRIVATE_OF_ENV:
                bad.append(f"{filename}:{node.lineno} uses .{name.value}")
    return sorted(set(bad))


def _py_files(*dirs: str) -> list[Path]:
    files = []
    for d in dirs:
        files += sorted((REPO / d).rglob("*.py"))
    return files


def _check_tree(dirs: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in _py_files(*dirs):
        bad += violations(f.read_text(), forbidden, _package_of(f),
                          str(f.relative_to(REPO)))
    return bad


# --------------------------------------------------------------------------- the rule
def test_software_layers_have_python_files_to_check():
    """The walk finds the protocol and workload sources (the checks below are not vacuous)."""
    names = {p.relative_to(REPO).as_posix() for p in _py_files("protocols", "workloads")}
    assert "protocols/runtime.py" in names
    assert "workloads/microbench.py" in names
    assert {p.name for p in _py_files("rnicsim/hw")} >= {"rnic.py", "calendar.py", "pcie.py"}


def test_protocols_and_workloads_never_import_hw():
    """No module under protocols/ or workloads/ imports rnicsim.hw in any form."""
    assert _check_tree(("protocols", "workloads"), SOFTWARE_FORBIDDEN) == []


def test_hw_never_imports_software_layers():
    """rnicsim/hw imports neither protocols, workloads, rnicsim.verbs nor rnicsim.scenario."""
    assert _check_tree(("rnicsim/hw",), HW_FORBIDDEN) == []


def test_kernel_never_imports_protocols_or_workloads():
    """No module under rnicsim/ imports protocols or workloads (they register as plugins,
    loaded by name)."""
    assert _check_tree(("rnicsim",), KERNEL_FORBIDDEN) == []


def test_protocols_never_import_workloads():
    """No module under protocols/ imports workloads."""
    assert _check_tree(("protocols",), PROTOCOLS_FORBIDDEN) == []


def test_protocols_and_workloads_use_no_private_state():
    """No module under protocols/ or workloads/ (but the allowed ones) touches ``._hw``,
    ``._cq``, ``env._now`` or ``env._eid``."""
    bad = []
    for f in _py_files("protocols", "workloads"):
        rel = f.relative_to(REPO).as_posix()
        if rel not in PRIVATE_ALLOWED:
            bad += private_uses(f.read_text(), rel)
    assert bad == []


def test_private_allow_list_names_files_that_still_need_it():
    """Every allowed file exists and still uses a private name (a clean file leaves the
    list)."""
    for rel in PRIVATE_ALLOWED:
        assert private_uses((REPO / rel).read_text(), rel), rel


# --------------------------------------------------------------------------- self-test
@pytest.mark.parametrize("src, name", [
    ("n = qp._hw.qpn", "_hw"),
    ("qp._hw.timeout_ns = 5.0", "_hw"),
    ("m = self.cq._cq.mode", "_cq"),
    ("t = sim.env._now", "_now"),
    ("t = env._now", "_now"),
    ("t = self.rt.sim.env._now", "_now"),
    ("n = next(sim.env._eid)", "_eid"),
    ("h = getattr(qp, '_hw')", "_hw"),
    ("setattr(qp, '_cq', None)", "_cq"),
])
def test_private_checker_flags_private_state(src, name):
    """Reads and writes of the banned private names, in every spelling, are flagged with
    their line and name."""
    assert private_uses(src) == [f"<src>:1 uses .{name}"]


@pytest.mark.parametrize("src", [
    "t = sim.now",
    "n = sim.events_scheduled",
    "self._now = 0.0",             # a protocol's own field named _now, not the env's
    "x = self._hwm",               # a look-alike name
    "qp.modify(timeout_ns=5.0)",
    "m = cq.mode",
])
def test_private_checker_accepts_public_names(src):
    """The facade's names and look-alikes are not flagged."""
    assert private_uses(src) == []


@pytest.mark.parametrize("src", [
    "import rnicsim.hw",
    "import rnicsim.hw.rnic as r",
    "import os, rnicsim.hw.cache",
    "from rnicsim.hw import rnic",
    "from rnicsim.hw.wqe import READ, WRITE",
    "from rnicsim import hw",
    "from rnicsim import verbs, hw as h",
    "def f():\n    from rnicsim.hw.memory import MemoryRegion\n",
    "if True:\n    import rnicsim.hw.pcie\n",
    "import importlib\nm = importlib.import_module('rnicsim.hw.link')",
    "m = __import__('rnicsim.hw')",
])
def test_checker_flags_hw_imports(src):
    """The checker flags every form of importing rnicsim.hw."""
    assert violations(src, SOFTWARE_FORBIDDEN, "protocols.txn"), src


@pytest.mark.parametrize("src", [
    "import rnicsim.verbs",
    "from rnicsim.verbs import READ, Context",
    "from rnicsim import verbs, sim",
    "from rnicsim.cluster import Cluster",
    "import rnicsim.hwx",          # a different module that merely starts with 'hw'
    "hw = 1\nimport os",
])
def test_checker_accepts_allowed_imports(src):
    """Imports of the verbs layer and look-alike names are not flagged."""
    assert violations(src, SOFTWARE_FORBIDDEN, "protocols.txn") == []


@pytest.mark.parametrize("src", [
    "from ..verbs import Context",
    "from .. import verbs",
    "from ..scenario import Scenario",
    "import protocols.runtime",
    "from workloads.microbench import Microbench",
    "from rnicsim import scenario",
])
def test_checker_flags_upward_imports_from_hw(src):
    """Relative and absolute imports of the software layers from rnicsim/hw are flagged."""
    assert violations(src, HW_FORBIDDEN, "rnicsim.hw"), src


@pytest.mark.parametrize("src", [
    "from .calendar import Calendar",
    "from ..units import tx_time_ns",
    "from ..sim import Simulation",
    "from .. import units",
])
def test_checker_accepts_hw_internal_imports(src):
    """rnicsim/hw may import its siblings and the kernel above it."""
    assert violations(src, HW_FORBIDDEN, "rnicsim.hw") == []


def test_checker_resolves_relative_imports_against_the_package():
    """``from .. import x`` inside rnicsim.hw names rnicsim.x; inside rnicsim it names x."""
    assert (1, "rnicsim.verbs") in imported_modules("from .. import verbs", "rnicsim.hw")
    assert (1, "rnicsim.hw.cache") in imported_modules("from .cache import LruCache",
                                                       "rnicsim.hw")
    assert _package_of(REPO / "rnicsim" / "hw" / "rnic.py") == "rnicsim.hw"
