"""Build of the compiled core: the per-verb modules listed in rnicsim/hw/__init__.py
(COMPILED) compiled by Cython from the same .py files, typed by the .pxd beside each
(pure-Python mode: the .py files stay the model); a module with a .pyx (the event heap)
is built from that instead, its .py being the pure-Python reference.

Floats must round exactly as in Python: no fast-math and no fused multiply-add
contraction (-ffp-contract=off; GCC contracts by default in GNU C mode where the target
has FMA). Without Cython or a C compiler the build still succeeds, without extensions,
and rnicsim runs the pure-Python model (rnicsim.hw warns once). RNICSIM_PURE_PYTHON=1
at install time builds none.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
CFLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]


def compiled_modules() -> list[str]:
    """The names in rnicsim/hw/__init__.py's COMPILED tuple (read, not imported: the
    package imports numpy and simpy, which the build environment lacks)."""
    text = (HERE / "rnicsim" / "hw" / "__init__.py").read_text()
    m = re.search(r"^COMPILED\s*=\s*\(([^)]*)\)", text, re.M)
    return re.findall(r"\"(\w+)\"", m.group(1)) if m else []


class OptionalBuildExt(build_ext):
    """build_ext that leaves out what cannot be compiled instead of failing the
    install (rnicsim then runs in pure Python and says so once)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers
            print(f"rnicsim: compiled core not built ({exc}); pure Python", file=sys.stderr)

    def copy_file(self, infile, outfile, *args, **kwargs):
        """Put a built extension in place by renaming a copy over it: processes running
        the old one keep its file (writing into it would change their mapped code)."""
        tmp = f"{outfile}.tmp{os.getpid()}"
        result = super().copy_file(infile, tmp, *args, **kwargs)
        os.replace(tmp, outfile)
        return (outfile, result[1]) if isinstance(result, tuple) else result

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"rnicsim: {ext.name} not compiled ({exc}); pure Python", file=sys.stderr)


def _source(module: str) -> str:
    """What a compiled module is built from: its .pyx where it has one (a compiled
    implementation beside the pure-Python reference .py, e.g. the event heap), else the
    .py itself."""
    pyx = f"rnicsim/hw/{module}.pyx"
    return pyx if (HERE / pyx).exists() else f"rnicsim/hw/{module}.py"


def extensions() -> list:
    if os.environ.get("RNICSIM_PURE_PYTHON") == "1":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("rnicsim: Cython not found; pure Python", file=sys.stderr)
        return []
    exts = [Extension(f"rnicsim.hw.{m}", [_source(m)], extra_compile_args=CFLAGS)
            for m in compiled_modules()]
    try:
        # Types come from the .pxd files only: the .py annotations document the model
        # (a "float" there may be handed an int), they are no C types.
        return cythonize(exts, quiet=True, compiler_directives={
            "language_level": 3, "annotation_typing": False})
    except Exception as exc:
        print(f"rnicsim: Cython failed ({exc}); pure Python", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
