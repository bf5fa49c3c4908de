"""RDMC multicast on simulated RDMA (see README.md in this folder).

``from protocols.rdmc import Rdmc`` gives the engine (:class:`protocols.rdmc.engine.Rdmc`).
It is imported on first use, so that ``protocols.rdmc.schedules`` (pure functions) and
``rnicsim rdmc-schedule`` do not load the simulator.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Rdmc"]


def __getattr__(name: str) -> Any:
    if name == "Rdmc":
        from .engine import Rdmc

        return Rdmc
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
