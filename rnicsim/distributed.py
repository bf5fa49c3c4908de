"""Where a scenario's points run: in this process, on a local process pool, or on a Dask
distributed cluster.

A pool takes the points of a scenario as :class:`Task`\\ s and yields one :class:`Outcome`
per task as each finishes (completion order, not sweep order):

- :class:`SerialPool`: one after another in this process (``--jobs 1``);
- :class:`ProcessPool`: on N local worker processes (``--jobs N``);
- :class:`DaskPool`: on a Dask distributed cluster, an existing one
  (``--scheduler tcp://HOST:8786``, workers started with ``dask worker``) or a
  ``LocalCluster`` of N worker processes on loopback (``--scheduler local:N``).

Contract: a point that raises yields an Outcome with its error and the pool goes on with
the others. On Dask, a worker that dies mid-point (killed, out of memory, its machine
gone) costs nothing: the scheduler runs the point again on another worker, and only after
``distributed.scheduler.allowed-failures`` such deaths (3 by default) does the point fail
(``KilledWorker``). Where a point runs does not change its result: every random draw comes
from a stream seeded by the scenario, and results do not depend on the hash seed
(``tests/unit/test_hash_seed.py``). A point is sent as plain data (its resolved scenario
and its NIC profile), so workers need rnicsim installed but not the scenario or profile
files; a scenario's ``plugins:`` modules must be importable there.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Iterator

from .errors import InputError

# Seconds to reach a scheduler and to see its first worker before refusing --scheduler.
CONNECT_TIMEOUT_S = 10.0
# Test hook: a path; the first Dask worker to finish a point creates it and kills itself
# (SIGKILL) before handing the point back, as a worker lost mid-point.
KILL_HOOK = "RNICSIM_TEST_KILL_WORKER"

# One point at a time per process: the simulator tunes the process-wide garbage collector
# while it runs (rnicsim.sim.long_lived_heap), so two points in threads of one worker
# would disturb each other's memory use. Start workers with one thread each.
_POINT_LOCK = threading.Lock()


@dataclass(frozen=True)
class Task:
    """One point to run: its ``index`` in sweep order, its resolved scenario (a Scenario),
    its NIC profile (overrides applied) and the scenario file it came from (where its
    ``plugins:`` modules may live)."""

    index: int
    scenario: Any
    profile: Any
    source: str


@dataclass(frozen=True)
class Outcome:
    """A finished task: ``metrics`` (the point runner's dict) or ``error`` (one line:
    exception type and message); ``wall_s`` [s] the point's own wall time; ``worker``
    where it ran."""

    index: int
    metrics: dict[str, Any] | None
    error: str | None
    wall_s: float = 0.0
    worker: str = ""


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def run_task(index: int, scenario: Any, profile: Any, source: str) -> tuple[dict, float, str]:
    """Run one point where this function is called (a pool's worker) and return (metrics,
    wall time [s], worker name). ``scenario`` is a Scenario or its ``model_dump(mode=
    "json")``; ``profile`` None loads the scenario's own profile here."""
    from . import runner

    with _POINT_LOCK:
        if isinstance(scenario, dict):
            scenario = rebuild_point(scenario, source)
        t = time.perf_counter()
        m = runner.run_point(scenario) if profile is None else runner.run_point(scenario, profile)
        dt = time.perf_counter() - t
    return m, dt, f"{socket.gethostname()}:{os.getpid()}"


def rebuild_point(d: dict[str, Any], source: str):
    """A scenario point sent as plain data, validated again in this process (its plugins
    imported first, looked up beside ``source`` too)."""
    from .scenario import _rebuild, load_plugins

    if d.get("plugins"):
        load_plugins({"plugins": d["plugins"]}, source)
    return _rebuild().model_validate(d)


def dask_task(index: int, scenario: dict, profile: Any, source: str) -> tuple[dict, float, str]:
    """:func:`run_task` on a Dask worker, with the test hook :data:`KILL_HOOK`."""
    out = run_task(index, scenario, profile, source)
    hook = os.environ.get(KILL_HOOK)
    if hook:
        try:
            os.close(os.open(hook, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return out
        os.kill(os.getpid(), signal.SIGKILL)
    return out


def _process_task(index: int, scenario: dict, source: str) -> tuple[dict, float, str]:
    return run_task(index, scenario, None, source)


class SerialPool:
    """Points one after another in this process."""

    slots = 1
    where = "in this process"

    def run(self, tasks: list[Task]) -> Iterator[Outcome]:
        for t in tasks:
            try:
                m, dt, w = run_task(t.index, t.scenario, None, t.source)
            except Exception as e:  # noqa: BLE001 - one point's error is reported, not fatal
                yield Outcome(t.index, None, _error(e))
                continue
            yield Outcome(t.index, m, None, dt, w)

    def running(self, left: int) -> int:
        """Points running now, of ``left`` not finished: every slot is busy while points
        wait (a Dask worker takes its next point as soon as it finishes one)."""
        return min(self.slots, left)

    def close(self) -> None:
        pass


class ProcessPool(SerialPool):
    """Points on ``jobs`` local worker processes (one executor for every scenario run)."""

    def __init__(self, jobs: int) -> None:
        self.slots = jobs
        self.where = f"on {jobs} local processes"
        self._ex: ProcessPoolExecutor | None = None

    def run(self, tasks: list[Task]) -> Iterator[Outcome]:
        if self._ex is None:
            self._ex = ProcessPoolExecutor(max_workers=self.slots)
        futs = {self._ex.submit(_process_task, t.index, t.scenario.model_dump(mode="json"),
                                t.source): t.index for t in tasks}
        try:
            for f in as_completed(futs):
                try:
                    m, dt, w = f.result()
                except Exception as e:  # noqa: BLE001
                    yield Outcome(futs[f], None, _error(e))
                    continue
                yield Outcome(futs[f], m, None, dt, w)
        finally:
            for f in futs:
                f.cancel()

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(wait=True, cancel_futures=True)
            self._ex = None


class DaskPool(SerialPool):
    """Points on a Dask distributed cluster (see module doc); connects on creation."""

    def __init__(self, scheduler: str) -> None:
        import logging

        from distributed import Client, LocalCluster

        self._cluster = None
        m = re.fullmatch(r"local:(\d+)", scheduler)
        if m:
            n = int(m.group(1))
            if n < 1:
                raise InputError("command line", "--scheduler", f"local:N with N >= 1, got {scheduler!r}")
            # Loopback only, no dashboard; no memory limit, as --jobs has none (a point
            # that outgrows a share of the memory must not be killed and retried).
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         host="127.0.0.1", scheduler_port=0,
                                         dashboard_address=None, memory_limit=0,
                                         silence_logs=logging.ERROR)
            self.where = f"on a local Dask cluster of {n} worker processes"
            address = self._cluster.scheduler_address
        else:
            address = scheduler
            self.where = f"on the Dask cluster at {scheduler}"
        try:
            self.client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s",
                                 set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            self.close()
            raise InputError("command line", "--scheduler",
                             f"the address of a reachable Dask scheduler such as "
                             f"tcp://HOST:8786 or local:N ({scheduler}: {e})") from None
        try:
            self.client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            self.client.run(_worker_check)
        except TimeoutError:
            self.close()
            raise InputError("command line", "--scheduler",
                             f"a scheduler with workers ({scheduler}: no worker joined within "
                             f"{CONNECT_TIMEOUT_S:g} s; start some with "
                             f"'dask worker {scheduler} --nthreads 1')") from None
        except Exception as e:  # noqa: BLE001 - a worker that cannot import rnicsim
            self.close()
            raise InputError("command line", "--scheduler",
                             f"workers that have rnicsim installed ({scheduler}: "
                             f"{_error(e)})") from None

    @property
    def slots(self) -> int:  # type: ignore[override]
        return max(1, sum(self.client.nthreads().values()))

    def run(self, tasks: list[Task]) -> Iterator[Outcome]:
        from distributed import as_completed as dask_completed

        tag = uuid.uuid4().hex[:8]
        futs = {}
        for t in tasks:
            f = self.client.submit(dask_task, t.index, t.scenario.model_dump(mode="json"),
                                   t.profile, t.source, key=f"rnicsim-{tag}-{t.index:03d}",
                                   pure=False, retries=0)
            futs[f.key] = (f, t.index)
        left = set(futs)
        try:
            for f in dask_completed([f for f, _i in futs.values()], loop=self.client.loop):
                i = futs[f.key][1]
                left.discard(f.key)
                if f.status == "finished":
                    m, dt, w = f.result()
                    yield Outcome(i, m, None, dt, w)
                else:
                    yield Outcome(i, None, _error(f.exception()))
                f.release()
        finally:
            if left:           # interrupted: the cluster must not go on with them
                self.client.cancel([futs[k][0] for k in left])

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _worker_check() -> str:
    """Run on every worker before any point: importing rnicsim there must work."""
    import rnicsim

    return getattr(rnicsim, "__version__", "")


def open_pool(jobs: int = 1, scheduler: str | None = None):
    """The pool for ``--jobs`` / ``--scheduler`` (see module doc). InputError naming the
    flag for a ``--scheduler`` that is not an address or ``local:N``, or that cannot be
    reached, before any point runs."""
    if scheduler is None:
        return ProcessPool(jobs) if jobs > 1 else SerialPool()
    if not (re.fullmatch(r"local:\d+", scheduler)
            or re.fullmatch(r"(\w+://)?[\w.\-\[\]:]+:\d+", scheduler)):
        raise InputError("command line", "--scheduler",
                         f"tcp://HOST:PORT (a Dask scheduler) or local:N (a local Dask "
                         f"cluster of N worker processes), got {scheduler!r}")
    return DaskPool(scheduler)
