"""Serializability checker for transaction histories (``rnicsim check-history``).

A transaction framework records every committed transaction in a :class:`History`: the
``(key, version)`` pairs it read and the ``(key, version)`` pairs it installed.
:meth:`History.check` then decides whether some serial order of the committed
transactions explains every read and every installed version, and if not, names the
anomaly with a witness.

Version rules (the contract between recorder and checker):

- Versions count the installed writes of a key from 0. Version 0 is the initial value;
  the k-th committed write to a key installs version k. A write never installs 0.
- A read ``(key, v)`` observed the value installed by the writer of version v
  (v = 0: the initial value). A transaction may read its own writes.
- A transaction may install several versions of one key (e.g. 3 and 4); all but its
  highest are intermediate versions.
- The order of transactions in the history (commit order, file order) is ignored.

The verdict is exact: serializable if and only if some serial order of the committed
transactions installs every version in its place and lets every read see the version
it names (its own writes included). A property test checks this against a brute-force
search over all orders.

The checker builds Adya's direct serialization graph over committed transactions:
``ww`` edge writer(v) -> writer(v+1); ``wr`` edge writer(v) -> each reader of v;
``rw`` (anti-dependency) edge each reader of v -> writer(v+1). Self edges are
dropped, so a transaction that reads v and installs v+1 is fine. A cycle is reported
with its edge kinds and classified: ``G0`` (only ww), ``G1c`` (ww and wr), ``G-single``
(exactly one rw: read skew, the version-counted lost update) or ``G2-item`` (two or
more rw: write skew).

Besides cycles, these shapes are reported as *not serializable* (never as malformed
input), in this order of precedence for the headline:

- ``lost-update``: two transactions installed the same version of a key.
- ``aborted-read`` (G1a): a read of a version v > 0 that no committed transaction
  installed (written by an aborted transaction, or invented).
- ``intermediate-read`` (G1b): a read of a version that its writer overwrote itself.
- ``gap``: version v of a key was installed while some version below v never was.
  The recorder must log every committed transaction; a gap means a lost write or an
  incomplete history, and no serial order can produce it. The edges still chain the
  installed versions across the gap, so cycles are found too.

When several transactions installed one version, every one of them gets that version's
edges, which is what turns the classic lost update into an rw 2-cycle. All findings
are kept in :attr:`CheckResult.problems` (ten messages per kind).

*Malformed* input is different: a missing or wrong-typed field, an unknown field, a
field repeated in one line, a negative version, a write of version 0, the same (key, version) twice in one
transaction's writes, or a committed id used twice. The recorder raises ``ValueError``;
the file reader raises :class:`~rnicsim.errors.InputError` naming ``file:line`` and the
key path (``reads[2][1]``).

Aborted transactions (:meth:`History.abort`) are counted only; they are not graph nodes.

Checking is linear in the history size: Kahn's algorithm peels the acyclic part of the
graph, and only the residue (nodes on or behind a cycle) is searched for a short cycle
by breadth-first search. Nothing recurses. A 200k-transaction history (1.2M edges)
loads in about 1 s and checks in about 1 s; 10**6 transactions take about 7 s + 9 s and
1.3 GB.

File format (JSON lines, one transaction per line, blank lines ignored)::

    {"id": 12, "reads": [["acct:7", 3], [["acct", 9], 1]], "writes": [["acct:7", 4]]}
    {"id": "c3-41", "aborted": true}

``id`` is a string or integer, unique among committed transactions. Keys are strings,
integers or (nested) lists of them; lists become tuples. ``aborted`` is optional; an
aborted line carries only ``id`` and ``aborted``.
"""
from __future__ import annotations

import gc
import json
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any, Hashable, Iterable, Iterator, NamedTuple, Sequence

from rnicsim.errors import InputError

__all__ = ["History", "CheckResult", "Edge", "KINDS", "USAGE", "main",
           "format_edge", "format_key", "format_txn"]

USAGE = """usage: rnicsim check-history FILE

Check a transaction history for serializability.

FILE is JSON lines ('-' reads stdin), one committed transaction per line:
  {"id": 12, "reads": [["acct:7", 3]], "writes": [["acct:7", 4]]}
Version 0 of a key is its initial value; the k-th committed write installs version k.
A line {"id": 13, "aborted": true} counts an aborted transaction.

exit status: 0 serializable (one-line summary), 1 not serializable (the anomaly and a
dependency cycle such as 'T12 -rw(acct:7)-> T40'), 2 malformed input.
"""

KINDS = ("serializable", "lost-update", "aborted-read", "intermediate-read", "gap",
         "G0", "G1c", "G-single", "G2-item")
"""Every value of :attr:`CheckResult.kind`; the structural kinds take precedence over
cycles, in this order, when choosing the headline anomaly."""

_STRUCTURAL = ("lost-update", "aborted-read", "intermediate-read", "gap")
_MAX_MESSAGES = 10  # findings kept per kind; the rest are only counted
_MAX_KEY_DEPTH = 16
_MAX_VERSION = 2**63 - 1  # versions live in array('q')
_TxnId = Hashable
_Key = Hashable


class Edge(NamedTuple):
    """One dependency edge of the serialization graph: ``from_txn`` must precede ``to_txn``."""

    from_txn: _TxnId
    to_txn: _TxnId
    kind: str  # "ww", "wr" or "rw"
    key: _Key


@dataclass(frozen=True)
class CheckResult:
    """The verdict of :meth:`History.check`.

    ``kind`` is one of :data:`KINDS`; ``anomaly`` is one sentence about the headline
    finding ("" when serializable). ``cycle`` is a dependency cycle when the graph has
    one (it may accompany a structural finding, e.g. the rw 2-cycle of a lost update),
    and ``cycle_details`` gives the versions behind each of its edges. ``problems``
    lists the structural findings (at most ten per kind) and ``problem_counts`` counts
    all of them.
    """

    serializable: bool
    kind: str
    anomaly: str
    cycle: list[Edge] = field(default_factory=list)
    cycle_details: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    problem_counts: dict[str, int] = field(default_factory=dict)
    txns: int = 0
    aborted: int = 0
    keys: int = 0
    reads: int = 0
    writes: int = 0
    ww: int = 0
    wr: int = 0
    rw: int = 0

    @property
    def edges(self) -> int:
        """Number of dependency edges (parallel edges counted, self edges not)."""
        return self.ww + self.wr + self.rw

    def summary(self) -> str:
        """One line: the verdict and the counts."""
        verdict = "serializable" if self.serializable else f"NOT serializable ({self.kind})"
        return (f"{verdict}: {self.txns} committed transactions ({self.aborted} aborted), "
                f"{self.keys} keys, {self.reads} reads, {self.writes} writes, "
                f"{self.edges} dependency edges (ww {self.ww}, wr {self.wr}, rw {self.rw})")

    def render(self) -> str:
        """The full human report: summary, anomaly, cycle (one edge a line), problems."""
        lines = [self.summary()]
        if self.serializable:
            return lines[0]
        lines.append(f"anomaly: {self.anomaly}")
        if self.cycle:
            lines.append(f"cycle ({len(self.cycle)} edges):")
            for edge, detail in zip(self.cycle, self.cycle_details):
                lines.append(f"  {format_edge(edge)}   {detail}")
        rest = [p for p in self.problems if p != self.anomaly]
        total = sum(self.problem_counts.values()) - (self.kind in _STRUCTURAL)
        if total > 0:
            lines.append(f"other problems ({total}):")
            lines.extend(f"  {p}" for p in rest)
            if total > len(rest):
                lines.append(f"  ... and {total - len(rest)} more")
        return "\n".join(lines)


def format_txn(txn_id: _TxnId) -> str:
    """``12`` -> ``T12``; string ids print as they are."""
    return f"T{txn_id}" if isinstance(txn_id, int) else str(txn_id)


def format_key(key: _Key) -> str:
    """Strings and integers print as they are; tuple keys print as JSON lists."""
    if isinstance(key, tuple):
        return json.dumps(_key_to_json(key), separators=(",", ":"))
    return str(key)


def format_edge(edge: Edge) -> str:
    """``T12 -rw(acct:7)-> T40``."""
    return (f"{format_txn(edge.from_txn)} -{edge.kind}({format_key(edge.key)})-> "
            f"{format_txn(edge.to_txn)}")


class _Bad(Exception):
    """A malformed field: ``path`` inside the transaction and what was ``expected``."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"{path}: {expected}")
        self.path = path
        self.expected = expected


def _show(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _norm_key(value: Any, path: str, depth: int = 0) -> _Key:
    t = type(value)
    if t is str or t is int:
        return value
    if (t is list or t is tuple) and depth < _MAX_KEY_DEPTH:
        return tuple(_norm_key(v, path, depth + 1) for v in value)
    raise _Bad(path, "a key: a string, an integer or a list of them "
                     f"(nested at most {_MAX_KEY_DEPTH} deep), got {_show(value)}")


def _key_to_json(key: _Key) -> Any:
    if isinstance(key, tuple):
        return [_key_to_json(k) for k in key]
    return key


def _norm_id(value: Any) -> _TxnId:
    if type(value) is str or type(value) is int:
        return value
    raise _Bad("id", f"a transaction id: a string or an integer, got {_show(value)}")


def _as_list(ops: Any, name: str) -> Any:
    """``ops`` as a list when it is an iterable of pairs (a generator, say); anything
    else is left for :meth:`History._append` to reject with its key path."""
    if type(ops) is list or type(ops) is tuple or isinstance(ops, (str, bytes, dict)):
        return ops
    try:
        return list(ops)
    except TypeError:
        raise _Bad(name, f"a list of [key, version] pairs, got {_show(ops)}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: a key given twice in one line is malformed, not last-one-wins."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _v in pairs:
            if k in seen:
                raise _Bad(k, "a key given once per line (it is repeated)")
            seen.add(k)
    return obj


class History:
    """A recorder of committed (and counted aborted) transactions, and its checker.

    Transactions keep their commit order, which the checker ignores: only versions
    matter. Ids are unique among committed transactions. Storage is columnar: keys are
    interned to small integers and every read and write is one row of three
    ``array('q')`` columns (transaction, key, version), about 24 bytes per access.
    """

    def __init__(self) -> None:
        self._ids: list[_TxnId] = []
        self._index: dict[_TxnId, int] = {}
        self._keys: list[_Key] = []
        self._kid: dict[_Key, int] = {}
        self._rt, self._rk, self._rv = array("q"), array("q"), array("q")
        self._wt, self._wk, self._wv = array("q"), array("q"), array("q")
        self._aborted: list[_TxnId] = []

    # -- recording ---------------------------------------------------------------------

    def commit(self, txn_id: _TxnId, reads: Iterable[Sequence[Any]] = (),
               writes: Iterable[Sequence[Any]] = ()) -> None:
        """Record a committed transaction; ``ValueError`` on a malformed record.

        ``reads`` and ``writes`` are ``(key, version)`` pairs; list keys become tuples.
        A rejected record leaves the history unchanged.
        """
        try:
            self._commit(txn_id, _as_list(reads, "reads"), _as_list(writes, "writes"))
        except _Bad as e:
            raise ValueError(f"History.commit({txn_id!r}): {e}") from None

    def abort(self, txn_id: _TxnId) -> None:
        """Count an aborted transaction; it takes no part in the check."""
        try:
            self._aborted.append(_norm_id(txn_id))
        except _Bad as e:
            raise ValueError(f"History.abort({txn_id!r}): {e}") from None

    def _commit(self, txn_id: Any, reads: Any, writes: Any) -> None:
        txn_id = _norm_id(txn_id)
        if txn_id in self._index:
            raise _Bad("id", f"a unique transaction id; {_show(txn_id)} already committed")
        i = len(self._ids)
        marks = len(self._rt), len(self._wt)
        try:
            self._append(i, reads, "reads", self._rt, self._rk, self._rv, 0)
            self._append(i, writes, "writes", self._wt, self._wk, self._wv, 1)
        except _Bad:
            for col in (self._rt, self._rk, self._rv):
                del col[marks[0]:]
            for col in (self._wt, self._wk, self._wv):
                del col[marks[1]:]
            raise
        self._index[txn_id] = i
        self._ids.append(txn_id)

    def _append(self, i: int, ops: Any, name: str, tcol: array, kcol: array, vcol: array,
                low: int) -> None:
        """Validate one reads/writes list and append it to the columns."""
        if type(ops) is not list and type(ops) is not tuple:
            raise _Bad(name, f"a list of [key, version] pairs, got {_show(ops)}")
        kid_of, keys = self._kid, self._keys
        start = len(kcol)
        for j, op in enumerate(ops):
            if (type(op) is not list and type(op) is not tuple) or len(op) != 2:
                raise _Bad(f"{name}[{j}]", f"a [key, version] pair, got {_show(op)}")
            key, version = op
            if type(version) is not int or not low <= version <= _MAX_VERSION:
                want = ("an integer version >= 1 (version 0 is the initial value)" if low
                        else "an integer version >= 0")
                raise _Bad(f"{name}[{j}][1]", f"{want}, got {_show(version)}")
            kid = kid_of.get(key) if type(key) is str or type(key) is int else None
            if kid is None:
                key = _norm_key(key, f"{name}[{j}][0]")
                kid = kid_of.get(key)
                if kid is None:
                    kid = kid_of[key] = len(keys)
                    keys.append(key)
            tcol.append(i)
            kcol.append(kid)
            vcol.append(version)
        if low and len(kcol) - start > 1:
            pairs = list(zip(kcol[start:], vcol[start:]))
            if len(set(pairs)) != len(pairs):
                seen: dict[tuple[int, int], int] = {}
                for j, kv in enumerate(pairs):
                    if kv in seen:
                        raise _Bad(f"{name}[{j}]", f"a (key, version) installed once per "
                                                   f"transaction; {name}[{seen[kv]}] is "
                                                   "the same")
                    seen[kv] = j

    def __len__(self) -> int:
        """Number of committed transactions."""
        return len(self._ids)

    @property
    def aborted(self) -> int:
        """Number of aborted transactions recorded."""
        return len(self._aborted)

    def _ops(self, i: int, write: bool) -> list[tuple[int, int]]:
        """``(key id, version)`` rows of transaction ``i`` (rows are grouped by txn)."""
        t, k, v = ((self._wt, self._wk, self._wv) if write
                   else (self._rt, self._rk, self._rv))
        a = bisect_left(t, i)
        b = bisect_left(t, i + 1, a)
        return list(zip(k[a:b], v[a:b]))

    def transactions(self) -> Iterator[tuple[_TxnId, list, list]]:
        """``(id, reads, writes)`` of each committed transaction, in commit order."""
        keys = self._keys
        r = w = 0
        rt, rk, rv, wt, wk, wv = (self._rt, self._rk, self._rv,
                                  self._wt, self._wk, self._wv)
        nr, nw = len(rt), len(wt)
        for i, txn_id in enumerate(self._ids):
            reads = []
            while r < nr and rt[r] == i:
                reads.append((keys[rk[r]], rv[r]))
                r += 1
            writes = []
            while w < nw and wt[w] == i:
                writes.append((keys[wk[w]], wv[w]))
                w += 1
            yield txn_id, reads, writes

    # -- files -------------------------------------------------------------------------

    def to_jsonl(self, path: str) -> None:
        """Write the history as JSON lines: committed transactions, then aborted ones."""
        with open(path, "w", encoding="utf-8") as f:
            for line in self.jsonl_lines():
                f.write(line + "\n")

    def jsonl_lines(self) -> Iterator[str]:
        """The lines :meth:`to_jsonl` writes, without newlines."""
        dump = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        for txn_id, reads, writes in self.transactions():
            yield dump({"id": txn_id,
                        "reads": [[_key_to_json(k), v] for k, v in reads],
                        "writes": [[_key_to_json(k), v] for k, v in writes]})
        for txn_id in self._aborted:
            yield dump({"id": txn_id, "aborted": True})

    @classmethod
    def from_jsonl(cls, path: str) -> "History":
        """Read a JSON-lines history; :class:`InputError` names ``file:line`` and key path."""
        try:
            with open(path, "rb") as f:
                return cls.from_lines(f, path)
        except OSError as e:
            raise InputError(path, "", "a readable JSON-lines history file "
                                       f"({e.strerror or e})") from None

    @classmethod
    def from_lines(cls, lines: Iterable[str | bytes], source: str) -> "History":
        """Parse JSON lines (str or UTF-8 bytes); ``source`` names them in errors.

        ``lines`` is an iterable of lines (a list, an open file) or one whole text (a str
        or bytes), which is split into lines."""
        if isinstance(lines, (str, bytes)):
            lines = lines.splitlines()
        enabled = gc.isenabled()
        gc.disable()  # millions of acyclic containers: the collector would only slow us
        try:
            return cls._parse(lines, source)
        finally:
            if enabled:
                gc.enable()

    @classmethod
    def _parse(cls, lines: Iterable[str | bytes], source: str) -> "History":
        hist = cls()
        first_line: dict[_TxnId, int] = {}
        loads = json.JSONDecoder(object_pairs_hook=_unique_keys).decode
        for lineno, raw in enumerate(lines, 1):
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(f"{source}:{lineno}", "", f"UTF-8 text ({e.reason} "
                                                               f"at byte {e.start})") from None
            if not raw or raw.isspace():
                continue
            try:
                obj = loads(raw)
            except _Bad as e:
                raise InputError(f"{source}:{lineno}", e.path, e.expected) from None
            except (ValueError, RecursionError) as e:
                raise InputError(f"{source}:{lineno}", "",
                                 f"one JSON object per line ({e})") from None
            try:
                if type(obj) is not dict:
                    raise _Bad("", "a JSON object with keys id, reads, writes, "
                                   f"got {_show(obj)}")
                if len(obj) != 3 or "reads" not in obj or "writes" not in obj:
                    if cls._odd_line(hist, obj):
                        continue
                txn_id = obj.get("id", first_line)  # a sentinel no JSON value equals
                if txn_id is first_line:
                    raise _Bad("id", "a transaction id (the key is missing)")
                txn_id = _norm_id(txn_id)
                if txn_id in first_line:
                    raise _Bad("id", f"a unique transaction id; {_show(txn_id)} already "
                                     f"committed on line {first_line[txn_id]}")
                hist._commit(txn_id, obj["reads"], obj["writes"])
                first_line[txn_id] = lineno
            except _Bad as e:
                raise InputError(f"{source}:{lineno}", e.path, e.expected) from None
        return hist

    @staticmethod
    def _odd_line(hist: "History", obj: dict) -> bool:
        """Vet a line that is not exactly {id, reads, writes}.

        Returns True when it was an aborted transaction (now counted), False when it is
        a committed one (``"aborted": false``) for the caller to record.
        """
        for name in obj:
            if name not in ("id", "reads", "writes", "aborted"):
                raise _Bad(name, "no such key; allowed keys are id, reads, writes, aborted")
        if "id" not in obj:
            raise _Bad("id", "a transaction id (the key is missing)")
        txn_id = _norm_id(obj["id"])
        aborted = obj.get("aborted", False)
        if type(aborted) is not bool:
            raise _Bad("aborted", f"true or false, got {_show(aborted)}")
        if aborted:
            for name in ("reads", "writes"):
                if name in obj:
                    raise _Bad(name, "nothing: an aborted transaction's line has only "
                                     "id and aborted")
            hist._aborted.append(txn_id)
            return True
        for name in ("reads", "writes"):
            if name not in obj:
                raise _Bad(name, "a list of [key, version] pairs (the key is missing)")
        return False

    # -- checking ----------------------------------------------------------------------

    def check(self) -> CheckResult:
        """Decide serializability; see the module docstring for the rules."""
        enabled = gc.isenabled()
        gc.disable()  # millions of small acyclic lists: spare the collector's scans
        try:
            return _Checker(self).run()
        finally:
            if enabled:
                gc.enable()


class _Checker:
    """One check of one history. Transactions are nodes ``0..n-1``, keys ``0..K-1``.

    Index: a *regular* key (every version 1..max installed exactly once) keeps a list
    ``slots[key][v] = installer of v`` (slot 0 stands for the initial value). Any other
    key is *irregular*: ``slots[key]`` is None and ``irr[key]`` maps each installed
    version to its installers. Only broken histories have irregular keys, so the hot
    loops touch one list per access.
    """

    def __init__(self, hist: History) -> None:
        self.h = hist
        self.n = len(hist._ids)
        self.slots: list[list[int] | None] = []
        self.irr: dict[int, dict[int, list[int]]] = {}
        self.vers: dict[int, list[int]] = {}     # irregular key -> sorted versions
        self.inter: dict[tuple[int, int], list[int]] = {}  # (key, version) -> the txns
        #                                 that installed it and then overwrote it themselves
        self.read_only: set[int] = set()          # keys read but never installed
        self.found: dict[str, list[str]] = {k: [] for k in _STRUCTURAL}
        self.counts: dict[str, int] = {k: 0 for k in _STRUCTURAL}

    def txn(self, i: int) -> str:
        return format_txn(self.h._ids[i])

    def key(self, kid: int) -> str:
        return format_key(self.h._keys[kid])

    def note(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        if len(self.found[kind]) < _MAX_MESSAGES:
            self.found[kind].append(f"{kind}: {message}")

    def installers(self, kid: int, version: int) -> list[int]:
        """Every committed transaction that installed ``version`` of key ``kid``."""
        lst = self.slots[kid]
        if lst is not None:
            return [lst[version]] if 0 < version < len(lst) else []
        return self.irr.get(kid, {}).get(version, [])

    def next_version(self, kid: int, version: int) -> int | None:
        """The lowest installed version of key ``kid`` above ``version``, if any."""
        lst = self.slots[kid]
        if lst is not None:
            return version + 1 if version + 1 < len(lst) else None
        vs = self.vers.get(kid)
        if vs is None:
            return None
        i = bisect_right(vs, version)
        return vs[i] if i < len(vs) else None

    def run(self) -> CheckResult:
        self.index_writes()
        out, indeg, counts = self.build_edges()
        residue = self.peel(out, indeg)
        cycle: list[Edge] = []
        details: list[str] = []
        if residue:
            for u, v in self.short_cycle(out, residue):
                edge, detail = self.label(u, v)
                cycle.append(edge)
                details.append(detail)
        return self.result(cycle, details, counts)

    def index_writes(self) -> None:
        h = self.h
        nkeys = len(h._keys)
        # One slot per write of a key: a regular key fills its slots exactly, so a version
        # beyond its key's write count proves a gap and never grows a list.
        slots: list[list[int] | None] = [None] * nkeys
        for kid, c in Counter(h._wk).items():
            slots[kid] = [-1] * (c + 1)
        spill: dict[int, list[tuple[int, int]]] = {}  # (version, txn) that found no slot
        last = [-1] * nkeys   # last writer of each key; rows are grouped by transaction
        multi = []            # (txn, key): the txn installed several versions of the key
        for i, kid, v in zip(h._wt, h._wk, h._wv):
            lst = slots[kid]
            if v < len(lst) and lst[v] == -1:  # type: ignore[arg-type]
                lst[v] = i  # type: ignore[index]
            else:
                spill.setdefault(kid, []).append((v, i))
            if last[kid] == i:
                multi.append((i, kid))
            else:
                last[kid] = i
        for i, kid in set(multi):
            mine = [v for k, v in h._ops(i, True) if k == kid]
            top = max(mine)
            for v in mine:
                if v != top:
                    self.inter.setdefault((kid, v), []).append(i)
        for kid, lst in enumerate(slots):
            if lst is None:
                continue
            lst[0] = -2  # the initial value; -1 now marks exactly the missing versions
            if kid in spill or -1 in lst:
                by_version = {v: [t] for v, t in enumerate(lst) if t >= 0}
                for v, t in spill.get(kid, ()):
                    by_version.setdefault(v, []).append(t)
                slots[kid] = None
                self.irr[kid] = by_version
                self.vers[kid] = sorted(by_version)
        self.slots = slots
        for kid, by_version in sorted(self.irr.items()):
            prev = 0
            for v in self.vers[kid]:
                ts = sorted(by_version[v])
                if len(ts) > 1:
                    names = [self.txn(t) for t in ts]
                    who = (f"{names[0]} and {names[1]} both" if len(names) == 2
                           else ", ".join(names[:-1]) + f" and {names[-1]} all")
                    self.note("lost-update", f"{who} installed {self.key(kid)} version {v}")
                if v > prev + 1:
                    missing = (f"version {prev + 1}" if v == prev + 2
                               else f"versions {prev + 1}..{v - 1}")
                    self.note("gap", f"{self.key(kid)} {missing} never installed by a "
                                     f"committed transaction, but version {v} was (by "
                                     f"{self.txn(ts[0])})")
                prev = v

    def build_edges(self) -> tuple[list[list[int]], list[int], dict[str, int]]:
        n, h = self.n, self.h
        slots, irr, inter = self.slots, self.irr, self.inter
        out: list[list[int]] = [[] for _ in range(n)]
        indeg = [0] * n
        ww = wr = rw = 0
        for lst in slots:
            if lst is not None and len(lst) > 2:
                for p, c in zip(islice(lst, 1, None), islice(lst, 2, None)):
                    if p != c:
                        out[p].append(c)
                        indeg[c] += 1
                        ww += 1
        for kid, vs in self.vers.items():
            by_version = irr[kid]
            for a, b in zip(vs, vs[1:]):
                for p in by_version[a]:
                    for c in by_version[b]:
                        if p != c:
                            out[p].append(c)
                            indeg[c] += 1
                            ww += 1
        for i, kid, v in zip(h._rt, h._rk, h._rv):
            lst = slots[kid]
            if lst is None:
                if kid in irr:
                    e_wr, e_rw = self.irregular_read(out, indeg, i, kid, v)
                    wr += e_wr
                    rw += e_rw
                else:
                    self.read_only.add(kid)
                    if v:
                        self.note_aborted_read(i, kid, v)
                continue
            if v:
                if v >= len(lst):
                    self.note_aborted_read(i, kid, v)
                    continue
                w = lst[v]
                if w != i:
                    out[w].append(i)
                    indeg[i] += 1
                    wr += 1
                    if inter and (kid, v) in inter:
                        self.note_intermediate(i, kid, v, w)
            v += 1
            if v < len(lst):
                w = lst[v]
                if w != i:
                    out[i].append(w)
                    indeg[w] += 1
                    rw += 1
        return out, indeg, {"ww": ww, "wr": wr, "rw": rw}

    def irregular_read(self, out: list[list[int]], indeg: list[int], i: int, kid: int,
                       v: int) -> tuple[int, int]:
        """Edges of one read of an irregular key; returns the (wr, rw) edges added."""
        e_wr = e_rw = 0
        if v:
            ws = self.installers(kid, v)
            if not ws:
                self.note_aborted_read(i, kid, v)
            for w in ws:
                if w != i:
                    out[w].append(i)
                    indeg[i] += 1
                    e_wr += 1
            others = [w for w in self.inter.get((kid, v), ()) if w != i]
            if others:
                self.note_intermediate(i, kid, v, min(others))
        nv = self.next_version(kid, v)
        if nv is not None:
            for w in self.installers(kid, nv):
                if w != i:
                    out[i].append(w)
                    indeg[w] += 1
                    e_rw += 1
        return e_wr, e_rw

    def note_aborted_read(self, i: int, kid: int, v: int) -> None:
        lst = self.slots[kid]
        vs = self.vers.get(kid)
        top = vs[-1] if vs else (len(lst) - 1 if lst is not None else 0)
        self.note("aborted-read", f"{self.txn(i)} read {self.key(kid)} version {v}, which "
                                  "no committed transaction installed (G1a; the highest "
                                  f"committed version is {top})")

    def note_intermediate(self, i: int, kid: int, v: int, w: int) -> None:
        self.note("intermediate-read", f"{self.txn(i)} read {self.key(kid)} version {v}, "
                                       f"which its writer {self.txn(w)} overwrote itself "
                                       "(G1b)")

    @staticmethod
    def peel(out: list[list[int]], indeg: list[int]) -> list[int]:
        """Kahn's algorithm; returns the nodes left over (on or downstream of a cycle)."""
        queue = [u for u, d in enumerate(indeg) if d == 0]
        for u in queue:  # the list grows while we walk it
            for v in out[u]:
                d = indeg[v] - 1
                indeg[v] = d
                if d == 0:
                    queue.append(v)
        if len(queue) == len(indeg):
            return []
        return [u for u, d in enumerate(indeg) if d > 0]

    def short_cycle(self, out: list[list[int]], residue: list[int]) -> list[tuple[int, int]]:
        """A short cycle inside the Kahn residue, as a list of (u, v) node pairs.

        Every residue node has a predecessor in the residue, so walking predecessors
        must revisit a node: that closes a cycle. Breadth-first searches from up to 16
        of its nodes then pick the shortest cycle through any of them.
        """
        alive = bytearray(self.n)
        for u in residue:
            alive[u] = 1
        pred: dict[int, int] = {}
        for u in residue:
            for v in out[u]:
                if alive[v] and v not in pred:
                    pred[v] = u
        pos: dict[int, int] = {}
        walk: list[int] = []
        x = residue[0]
        while x not in pos:
            pos[x] = len(walk)
            walk.append(x)
            x = pred[x]
        best: list[int] | None = None
        for c in sorted(walk[pos[x]:])[:16]:
            path = self.bfs_cycle(out, alive, c, len(best) if best else None)
            if path is not None and (best is None or len(path) < len(best)):
                best = path
                if len(best) == 2:
                    break
        assert best is not None
        return [(best[j], best[(j + 1) % len(best)]) for j in range(len(best))]

    @staticmethod
    def bfs_cycle(out: list[list[int]], alive: bytearray, c: int,
                  limit: int | None) -> list[int] | None:
        """The shortest cycle through ``c`` shorter than ``limit`` (nodes from ``c`` on)."""
        parent = {c: -1}
        frontier = deque([(c, 0)])
        while frontier:
            u, depth = frontier.popleft()
            if limit is not None and depth + 1 >= limit:
                return None
            for v in out[u]:
                if v == c:
                    path = [u]
                    while path[-1] != c:
                        path.append(parent[path[-1]])
                    path.reverse()
                    return path
                if alive[v] and v not in parent:
                    parent[v] = u
                    frontier.append((v, depth + 1))
        return None

    def label(self, u: int, v: int) -> tuple[Edge, str]:
        """Why ``u`` precedes ``v``: the strongest edge kind (ww, then wr, then rw)."""
        h = self.h
        tu, tv = h._ids[u], h._ids[v]
        fu, fv = format_txn(tu), format_txn(tv)
        u_writes, v_writes = h._ops(u, True), set(h._ops(v, True))
        for kid, a in u_writes:
            nb = self.next_version(kid, a)
            if nb is not None and (kid, nb) in v_writes:
                return (Edge(tu, tv, "ww", h._keys[kid]),
                        f"{fu} installed version {a}, {fv} installed version {nb}")
        installed = set(u_writes)
        for kid, b in h._ops(v, False):
            if b and (kid, b) in installed:
                return (Edge(tu, tv, "wr", h._keys[kid]),
                        f"{fv} read version {b} installed by {fu}")
        for kid, a in h._ops(u, False):
            nb = self.next_version(kid, a)
            if nb is not None and (kid, nb) in v_writes:
                return (Edge(tu, tv, "rw", h._keys[kid]),
                        f"{fu} read version {a}, {fv} installed version {nb}")
        raise AssertionError(f"no dependency from {fu} to {fv}")  # pragma: no cover

    def result(self, cycle: list[Edge], details: list[str],
               counts: dict[str, int]) -> CheckResult:
        h = self.h
        keys = sum(lst is not None for lst in self.slots) + len(self.irr)
        base: dict[str, Any] = dict(
            cycle=cycle, cycle_details=details,
            problems=[m for kind in _STRUCTURAL for m in self.found[kind]],
            problem_counts={k: c for k, c in self.counts.items() if c},
            txns=self.n, aborted=len(h._aborted), keys=keys + len(self.read_only),
            reads=len(h._rt), writes=len(h._wt), **counts)
        for kind in _STRUCTURAL:
            if self.counts[kind]:
                return CheckResult(serializable=False, kind=kind,
                                   anomaly=self.found[kind][0], **base)
        if cycle:
            kind, anomaly = _classify(cycle)
            return CheckResult(serializable=False, kind=kind, anomaly=anomaly, **base)
        return CheckResult(serializable=True, kind="serializable", anomaly="", **base)


def _classify(cycle: list[Edge]) -> tuple[str, str]:
    """Adya's name for a dependency cycle and a sentence describing it."""
    n_rw = sum(e.kind == "rw" for e in cycle)
    n_wr = sum(e.kind == "wr" for e in cycle)
    size = f"a cycle of {len(cycle)} transactions"
    if n_rw == 0 and n_wr == 0:
        return "G0", f"G0 (write cycle): {size} ordered only by installed versions (ww)"
    if n_rw == 0:
        return "G1c", (f"G1c (circular information flow): {size} of ww/wr dependencies, "
                       "each transaction sees the other's writes")
    if n_rw == 1:
        return "G-single", (f"G-single: {size} with one anti-dependency (rw): a "
                            "transaction missed a write it must follow (read skew or "
                            "lost update)")
    return "G2-item", (f"G2-item: {size} with {n_rw} anti-dependencies (rw): each missed "
                       "another's write (write skew)")


def main(argv: list[str]) -> int:
    """``rnicsim check-history FILE``: 0 serializable, 1 not; InputError when malformed."""
    args = list(argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE, end="")
        return 0
    for a in args:
        if a.startswith("-") and a != "-":
            raise InputError("command line", a, "no such option; usage: rnicsim "
                                                "check-history FILE (or - for stdin)")
    if len(args) != 1:
        raise InputError("command line", "", "exactly one history FILE (or - for stdin); "
                                             "see 'rnicsim check-history --help'")
    if args[0] == "-":
        source = "<stdin>"
        hist = History.from_lines(_stdin_lines(sys.stdin), source)
    else:
        source = args[0]
        hist = History.from_jsonl(source)
    result = hist.check()
    if result.serializable:
        print(f"{source}: {result.summary()}")
        return 0
    print(f"{source}: {result.render()}")
    return 1


def _stdin_lines(stream: IO[str]) -> Iterable[bytes | str]:
    buf = getattr(stream, "buffer", None)
    return buf if buf is not None else stream
