"""The calendar's own cost in the fig. 5a run, compiled against pure Python, by replay.

Wall-clock rates of the whole simulator are too noisy on a shared machine to show a
change of a few per cent, and a profiler distorts the share of small functions. So this
records every booking call the fig. 5a READ run (``benchmarks/engine.py``'s workload,
pure-Python build) makes on its calendars, with the clock at each call, and replays the
calls on fresh calendars of the build this process runs (``rnicsim.hw``; set
``RNICSIM_PURE_PYTHON=1`` for the pure one). Prints one JSON object: ``build``, ``calls``,
``cpu_ns_per_call`` (best of three replays, CPU time, replay loop included) and
``busy_ns_total`` (the sum of every calendar's booked time, as ``repr``: it must be the
same in both builds).

Usage: ``python benchmarks/calendar_replay.py [--log FILE] [--measure-us 100]``; the log
is recorded once (in a child process running pure Python) and reused when it exists.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The methods that book or read a calendar; calls they make to each other are not logged.
METHODS = ("reserve", "reserve_packet", "reserve_split", "start_if_booked", "hold",
           "book_piece", "book_packet", "block", "free", "prune")


def record(path: str, measure_us: float) -> None:
    """Run the fig. 5a READ point in pure Python and log its calendar calls to ``path``:
    (calendar number, method, clock or None, args with objects as numbered stand-ins)."""
    import rnicsim.hw as hw
    import rnicsim.hw.calendar as cal_mod

    assert hw.PURE_PYTHON, "record with RNICSIM_PURE_PYTHON=1"
    log: list = []
    cals: dict = {}
    objs: dict = {}
    depth = [0]

    def arg(x):
        if x is None or isinstance(x, (int, float)):
            return x
        return ("obj", objs.setdefault(id(x), (len(objs), x))[0])

    def wrap(name: str):
        f = getattr(cal_mod.Calendar, name)

        def logged(self, *a):
            if depth[0] == 0:
                env = self.env
                log.append((cals.setdefault(id(self), (len(cals), self))[0], name,
                            env._now if env is not None else None, tuple(map(arg, a))))
            depth[0] += 1
            try:
                return f(self, *a)
            finally:
                depth[0] -= 1
        setattr(cal_mod.Calendar, name, logged)

    for m in METHODS:
        wrap(m)
    from benchmarks.engine import engine

    engine("read", 32, measure_us)
    with open(path, "wb") as fh:
        pickle.dump(log, fh)


class _Env:
    _now = 0.0


class _Item:
    """Stand-in for a held transfer or a packet's source (``late`` is what hold uses)."""

    __slots__ = ("late",)

    def __init__(self) -> None:
        self.late = 0.0


def replay(path: str) -> dict:
    """Replay the log on fresh calendars of this process's build, three times."""
    import rnicsim.hw as hw
    from rnicsim.hw.calendar import Calendar

    with open(path, "rb") as fh:
        log = pickle.load(fh)
    env = _Env()
    items: dict = {}
    calls = [(c, m, now, tuple(items.setdefault(x[1], _Item()) if isinstance(x, tuple)
                               else x for x in a)) for c, m, now, a in log]
    best = float("inf")
    total = 0.0
    for _ in range(3):
        cals: dict = {}
        for it in items.values():
            it.late = 0.0
        t = time.process_time()
        for c, m, now, a in calls:
            cal = cals.get(c)
            if cal is None:
                cal = cals[c] = Calendar(env)
            if now is not None:
                env._now = now
            getattr(cal, m)(*a)
        best = min(best, time.process_time() - t)
        total = sum(c.busy_ns for c in cals.values())
    return {"build": "pure-python" if hw.PURE_PYTHON else "compiled", "calls": len(calls),
            "cpu_ns_per_call": round(best / max(1, len(calls)) * 1e9),
            "busy_ns_total": repr(total)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default="/tmp/rnicsim_calendar_calls.pkl")
    ap.add_argument("--measure-us", type=float, default=100.0)
    ap.add_argument("--record-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.record_only:
        record(a.log, a.measure_us)
        return 0
    if not os.path.exists(a.log):
        subprocess.run([sys.executable, __file__, "--record-only", "--log", a.log,
                        "--measure-us", str(a.measure_us)], check=True,
                       env={**os.environ, "RNICSIM_PURE_PYTHON": "1"})
    print(json.dumps(replay(a.log)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
