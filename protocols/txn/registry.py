"""Registries of the transaction layer: protocol kinds and benchmarks.

Scope
    A concurrency-control protocol registers its ``protocol.kind`` with the class that
    runs it (a :class:`protocols.txn.driver.TxnSystem`), the function that turns a
    scenario's protocol block into its config, and its record layout. A transaction
    benchmark (SmallBank, TPC-C, TPC-E, YCSB, in ``workloads/``) registers its name with
    a factory; workloads import this module, never the other way round, and the
    scenario loader's plugin list imports them (:data:`rnicsim.scenario.PLUGINS`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class ProtocolEntry:
    """How to build one protocol kind: ``system(mesh, store, cfg, history)``,
    ``config_of(protocol_block) -> cfg`` and ``layout_of(cfg) -> store.Layout``."""

    kind: str
    system: Callable[..., Any]
    config_of: Callable[[Any], Any]
    layout_of: Callable[[Any], Any]


PROTOCOLS: dict[str, ProtocolEntry] = {}
BENCHMARKS: dict[str, Callable[..., Any]] = {}
# Benchmarks whose transactions declare their keys before running (TxnSpec.keys)
DECLARES_KEYS: set[str] = set()


def register_protocol(kind: str, system, config_of, layout_of) -> None:
    """Add protocol ``kind`` (see :class:`ProtocolEntry`)."""
    PROTOCOLS[kind] = ProtocolEntry(kind, system, config_of, layout_of)


def register_benchmark(name: str, factory: Callable[..., Any],
                       declares_keys: bool = True) -> None:
    """Add transaction benchmark ``name``: ``factory(params, nodes, threads, clock_hz,
    coroutines)`` returns the workload object (``tables``, ``next_txn``,
    ``cpu_estimate_ns``); ``declares_keys``: its transactions declare the records they
    touch (``TxnSpec.keys``), as CALVIN needs."""
    BENCHMARKS[name] = factory
    if declares_keys:
        DECLARES_KEYS.add(name)


def protocol(kind: str) -> ProtocolEntry:
    """The entry of ``kind``; ``ValueError("protocol.kind: ...")`` if none."""
    _load()
    e = PROTOCOLS.get(kind)
    if e is None:
        raise ValueError(f"protocol.kind: a concurrency-control protocol "
                         f"({', '.join(sorted(PROTOCOLS))}), got {kind!r}")
    return e


def make_workload(benchmark: str, params: dict, nodes: int, threads: int, clock_hz: float,
                  coroutines: int = 1):
    """The workload object of ``benchmark`` with ``params`` (keyword arguments of its
    spec), for ``coroutines`` per thread."""
    _load()
    f = BENCHMARKS.get(benchmark)
    if f is None:
        raise ValueError(f"benchmark: one of {', '.join(sorted(BENCHMARKS))}, not "
                         f"{benchmark!r}")
    return f(params, nodes, threads, clock_hz, coroutines)


def _load() -> None:
    # The scenario loader imports every plugin module, the workloads' among them.
    from rnicsim.scenario import import_builtin_plugins

    import_builtin_plugins()
