"""An output directory's record of its run: the points finished so far, and every file
rnicsim wrote there.

Layout under ``DIR`` (beside the results :mod:`rnicsim.runner` writes):

- ``points/run.json``: the scenario whose points these are (its resolved form, without
  ``plots``, ``expected`` and ``description``, which no point reads) and the number of
  points;
- ``points/NNN.json``: one finished point (NNN = its index in sweep order, from 000): the
  SHA-256 of its resolved scenario point and NIC profile, its swept values, its metrics,
  the files it handed back and its wall-clock times. Each is written atomically (a
  temporary file renamed into place) as soon as the point finishes, so an interrupted run
  keeps every point that had finished;
- ``rnicsim-manifest.json``: the paths (relative to ``DIR``) of every file rnicsim wrote
  there for this run, and whether the run completed.

Contract: rnicsim deletes a file under ``DIR`` only when the manifest lists it, so files a
user keeps there are never touched. A new run into ``DIR`` first deletes the previous
run's files (its results, plots and stored points), so none of them can pass for this
run's; it refuses when ``DIR`` holds the stored points of a run that did not complete
(finish it with ``--resume`` or discard it with ``--force``). ``--resume`` keeps the
stored points whose hash matches, and refuses, naming the differing keys, when they
belong to another scenario.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .errors import InputError
from .results import atomic_write

MANIFEST = "rnicsim-manifest.json"
POINTS = "points"
RUN = f"{POINTS}/run.json"
# Scenario keys that no point reads (they shape the report drawn from the rows): a resume
# may change them, and the new plots and claims are drawn from the stored points.
NOT_IN_POINTS = ("plots", "expected", "description")


def _dumps(obj: Any) -> str:
    # repr-exact floats; NaN and infinities as JSON's NaN/Infinity (json reads them back);
    # numpy scalars and other strangers as str, as summary.json has always written them.
    return json.dumps(obj, indent=1, default=str) + "\n"


def point_key(scenario: dict[str, Any], profile: dict[str, Any]) -> str:
    """SHA-256 (hex) of a resolved scenario point (its ``model_dump(mode="json")``) and
    its NIC profile's (with overrides applied): equal keys run the same simulation."""
    body = {k: v for k, v in scenario.items() if k not in NOT_IN_POINTS}
    text = json.dumps({"scenario": body, "profile": profile}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def differing_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted key paths at which two JSON-like values differ (``sweep.x``, ``cluster.nodes``,
    ``workload`` when a whole value changes type), in key order."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.append(key)
            else:
                out += differing_keys(a[k], b[k], key)
        return out
    return [] if a == b else [prefix or "(whole scenario)"]


class RunStore:
    """The stored points and manifest of one output directory ``out`` (see module doc).

    ``open(...)`` decides, before any point runs, what the directory keeps; then
    :meth:`save` stores each finished point and :meth:`finish` records the final files."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self._records: list[str] = []     # points/run.json and points/NNN.json
        self._final: list[str] = []       # results, plots, per-point files
        self._complete = False

    # ---------------------------------------------------------------- manifest
    def _read_manifest(self) -> dict[str, Any] | None:
        p = self.out / MANIFEST
        if not p.is_file():
            return None
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
        return m if isinstance(m, dict) and isinstance(m.get("written"), list) else None

    def _write_manifest(self) -> None:
        written = sorted(set(self._records + self._final))
        atomic_write(self.out / MANIFEST, _dumps({"complete": self._complete,
                                                  "written": written}))

    def _remove(self, paths: list[str]) -> None:
        """Delete the listed files (relative paths inside ``out``) and the folders they
        leave empty; never anything outside ``out`` or not listed."""
        root = self.out.resolve()
        dirs = set()
        for rel in paths:
            p = (self.out / rel).resolve()
            if root not in p.parents or not p.is_file():
                continue
            p.unlink()
            dirs.update(d for d in p.parents if root in d.parents)
        for d in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
            try:
                d.rmdir()             # only when empty: a user's file keeps its folder
            except OSError:
                pass

    # ---------------------------------------------------------------- run
    def check(self, resume: bool, force: bool) -> None:
        """Refuse (InputError naming ``--out``) a new run into a directory holding the stored
        points of a run that did not complete, unless ``resume`` or ``force``."""
        m = self._read_manifest()
        if resume or force or m is None or m.get("complete"):
            return
        n = len(list((self.out / POINTS).glob("[0-9][0-9][0-9]*.json")))
        if n:
            raise InputError("command line", "--out",
                             f"a directory without an unfinished run: {self.out} holds {n} "
                             f"stored point{'s' if n != 1 else ''} of a run that did not "
                             "complete; add --resume to run only the missing points, or "
                             "--force to discard them")

    def open(self, resolved: dict[str, Any], keys: list[str], resume: bool,
             force: bool) -> dict[int, dict[str, Any]]:
        """Start a run of the scenario ``resolved`` (its ``model_dump(mode="json")``) whose
        points have the :func:`point_key`\\ s ``keys``; return the stored records it keeps
        ({index: record}; empty unless ``resume``).

        Without ``resume`` the previous run's files are deleted first (see module doc).
        With ``resume``, an InputError naming ``--resume`` refuses stored points of another
        scenario (naming the differing keys) or of another NIC profile."""
        self.check(resume, force)
        self.out.mkdir(parents=True, exist_ok=True)
        old = self._read_manifest()
        body = {k: v for k, v in resolved.items() if k not in NOT_IN_POINTS}
        kept: dict[int, dict[str, Any]] = {}
        if resume and old is not None:
            kept = self._stored(body, keys)
            self._final = [w for w in old["written"] if not _is_record(w)]
        else:
            self._remove(old["written"] if old else [])
        self._records = [RUN] + [_record(i) for i in kept]
        self._write_manifest()
        atomic_write(self.out / RUN, _dumps({"scenario": body, "points": len(keys)}))
        return kept

    def _stored(self, body: dict[str, Any], keys: list[str]) -> dict[int, dict[str, Any]]:
        run = self.out / RUN
        if not run.is_file():
            return {}
        try:
            prev = json.loads(run.read_text())["scenario"]
        except (OSError, ValueError, KeyError, TypeError):
            raise InputError(str(run), "", "a run record written by rnicsim (it does not "
                             "read as one; --force discards the stored points)") from None
        diff = differing_keys(prev, body)
        if diff:
            shown = ", ".join(diff[:8]) + (f" and {len(diff) - 8} more" if len(diff) > 8 else "")
            raise InputError("command line", "--resume",
                             f"the scenario of the points stored in {self.out} ({prev.get('name')!r}); "
                             f"these keys differ: {shown} (run without --resume and with "
                             "--force, or into another --out)")
        kept = {}
        for i, key in enumerate(keys):
            p = self.out / _record(i)
            try:
                rec = json.loads(p.read_text())
            except (OSError, ValueError):
                continue             # never stored, or not readable: run it again
            if rec.get("key") != key:
                raise InputError("command line", "--resume",
                                 f"points of this scenario's NIC profile: {p} was run with "
                                 "another cluster.nic.profile content (the profile file "
                                 "changed); run without --resume and with --force")
            kept[i] = rec
        return kept

    def save(self, index: int, record: dict[str, Any]) -> dict[str, Any]:
        """Store one finished point atomically (``points/NNN.json``) and return the record
        as it reads back from the file, so a fresh run and a resumed one build their rows
        from the same values."""
        rel = _record(index)
        self._records.append(rel)
        self._write_manifest()        # listed before written: a crash leaves no unlisted file
        text = _dumps(record)
        atomic_write(self.out / rel, text)
        return json.loads(text)

    def finish(self, files: list[str]) -> None:
        """Record the run's final files (relative paths) and delete those of the previous
        run that this one did not write again (a plot the scenario no longer draws)."""
        stale = sorted(set(self._final) - set(files))
        self._final = list(files)
        self._complete = True
        self._write_manifest()
        self._remove(stale)


def _record(index: int) -> str:
    return f"{POINTS}/{index:03d}.json"


def _is_record(rel: str) -> bool:
    """Whether a manifest path is a point record or the run record (``points/*.json``)."""
    return rel.startswith(f"{POINTS}/") and rel.count("/") == 1 and rel.endswith(".json")
