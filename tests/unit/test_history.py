"""Unit tests of the serializability history checker (protocols/txn/history.py)."""
from __future__ import annotations

import io
import json
import re

import pytest

from protocols.txn.history import Edge, History, format_edge
from rnicsim.cli import main as cli
from rnicsim.errors import InputError


def hist(*txns, aborted=()):
    """A History from ``(id, reads, writes)`` triples."""
    h = History()
    for txn_id, reads, writes in txns:
        h.commit(txn_id, reads, writes)
    for txn_id in aborted:
        h.abort(txn_id)
    return h


def write_lines(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# -- serializable histories -------------------------------------------------------------


def test_empty_history_is_serializable():
    """A history with no transactions is serializable."""
    r = History().check()
    assert r.serializable and r.kind == "serializable" and r.anomaly == "" and r.cycle == []
    assert (r.txns, r.keys, r.edges) == (0, 0, 0)


def test_serial_history_is_serializable_with_counted_edges():
    """A serial bank transfer history passes and its edges are counted by kind."""
    r = hist(
        (1, [("a", 0), ("b", 0)], [("a", 1), ("b", 1)]),
        (2, [("a", 1)], [("a", 2)]),
        (3, [("a", 2), ("b", 1)], []),
        (4, [("b", 1)], [("b", 2)]),
        aborted=["x9"],
    ).check()
    assert r.serializable, r.render()
    assert (r.txns, r.aborted, r.keys, r.reads, r.writes) == (4, 1, 2, 6, 4)
    # ww: 1->2 (a), 1->4 (b); wr: 1->2 (a), 2->3 (a), 1->3 (b), 1->4 (b); rw: 3->4 (b)
    assert (r.ww, r.wr, r.rw) == (2, 4, 1)


def test_reading_own_writes_and_read_modify_write_are_fine():
    """Reading v then installing v+1, and reading one's own (intermediate) writes, pass."""
    r = hist(
        (1, [("x", 0), ("x", 1), ("x", 2)], [("x", 1), ("x", 2)]),
        (2, [("x", 2)], [("x", 3)]),
    ).check()
    assert r.serializable, r.render()


def test_tuple_and_int_keys_are_distinct_from_strings():
    """Key 7, key "7" and key ("acct", 7) are three different keys."""
    r = hist((1, [], [(7, 1), ("7", 1), (["acct", 7], 1)]),
             (2, [(7, 1), ("7", 1), (("acct", 7), 1)], [])).check()
    assert r.serializable and r.keys == 3


# -- anomalies --------------------------------------------------------------------------


def test_lost_update_same_version_is_caught_with_its_rw_cycle():
    """Two transactions installing x version 1 after reading version 0 is a lost update."""
    r = hist((1, [("x", 0)], [("x", 1)]), (2, [("x", 0)], [("x", 1)])).check()
    assert not r.serializable and r.kind == "lost-update"
    assert r.anomaly == "lost-update: T1 and T2 both installed x version 1"
    assert r.cycle == [Edge(1, 2, "rw", "x"), Edge(2, 1, "rw", "x")]


def test_blind_duplicate_install_is_a_lost_update_without_cycle():
    """Two blind writes of the same version are reported even though no cycle exists."""
    r = hist((1, [], [("x", 1)]), (2, [], [("x", 1)])).check()
    assert r.kind == "lost-update" and r.cycle == []


def test_lost_update_with_counted_versions_is_g_single():
    """Both read x@0, one installs 1 and the other 2: a cycle with one anti-dependency."""
    r = hist((1, [("x", 0)], [("x", 1)]), (2, [("x", 0)], [("x", 2)])).check()
    assert r.kind == "G-single"
    assert r.cycle == [Edge(1, 2, "ww", "x"), Edge(2, 1, "rw", "x")]
    assert r.cycle_details == ["T1 installed version 1, T2 installed version 2",
                               "T2 read version 0, T1 installed version 1"]


def test_write_skew_is_g2_item():
    """Each transaction reads both balances and writes a different one: two rw edges."""
    r = hist(
        (1, [("x", 0), ("y", 0)], [("x", 1)]),
        (2, [("x", 0), ("y", 0)], [("y", 1)]),
    ).check()
    assert r.kind == "G2-item"
    assert r.cycle == [Edge(1, 2, "rw", "y"), Edge(2, 1, "rw", "x")]
    assert r.anomaly.startswith("G2-item: a cycle of 2 transactions with 2 anti-dep")


def test_read_skew_is_g_single():
    """A reader sees the old x but the new y written by the same transaction."""
    r = hist((1, [], [("x", 1), ("y", 1)]), (2, [("x", 0), ("y", 1)], [])).check()
    assert r.kind == "G-single"
    assert r.cycle == [Edge(1, 2, "wr", "y"), Edge(2, 1, "rw", "x")]


def test_write_cycle_across_two_keys_is_g0():
    """T1 precedes T2 on x but follows it on y: a pure ww cycle."""
    r = hist((1, [], [("x", 1), ("y", 2)]), (2, [], [("x", 2), ("y", 1)])).check()
    assert r.kind == "G0"
    assert r.cycle == [Edge(1, 2, "ww", "x"), Edge(2, 1, "ww", "y")]


def test_circular_information_flow_is_g1c():
    """Each transaction reads the other's write."""
    r = hist((1, [("y", 1)], [("x", 1)]), (2, [("x", 1)], [("y", 1)])).check()
    assert r.kind == "G1c"
    assert r.cycle == [Edge(1, 2, "wr", "x"), Edge(2, 1, "wr", "y")]


def test_aborted_read_is_g1a():
    """A read of a version that no committed transaction installed is a dirty read."""
    r = hist((1, [], [("x", 1)]), (2, [("x", 2)], []), aborted=[3]).check()
    assert r.kind == "aborted-read" and r.aborted == 1
    assert r.anomaly == ("aborted-read: T2 read x version 2, which no committed transaction "
                         "installed (G1a; the highest committed version is 1)")


def test_read_of_a_never_written_key_beyond_zero_is_g1a():
    """Reading version 1 of a key nobody committed a write to is a dirty read."""
    assert hist(("c1", [("k", 1)], [])).check().kind == "aborted-read"


def test_intermediate_read_is_g1b():
    """Reading a version its writer overwrote within the same transaction."""
    r = hist((1, [], [("x", 1), ("x", 2)]), (2, [("x", 1)], [])).check()
    assert r.kind == "intermediate-read"
    assert "T2 read x version 1, which its writer T1 overwrote itself" in r.anomaly


def test_version_gap_is_reported_and_edges_bridge_it():
    """A missing version is a gap; the versions around it still order their writers."""
    r = hist((1, [], [("x", 1)]), (2, [("x", 1)], [("x", 4)]), (3, [("x", 4)], [])).check()
    assert r.kind == "gap"
    assert r.anomaly == ("gap: x versions 2..3 never installed by a committed transaction, "
                         "but version 4 was (by T2)")
    assert (r.ww, r.wr, r.rw) == (1, 2, 0)  # T2 read 1 and installed the next (4) itself


def test_structural_finding_outranks_cycle_but_both_are_reported():
    """A lost update elsewhere comes first; the write skew cycle is still listed."""
    r = hist(
        (1, [("x", 0), ("y", 0)], [("x", 1)]),
        (2, [("x", 0), ("y", 0)], [("y", 1)]),
        (3, [], [("z", 1)]),
        (4, [], [("z", 1)]),
    ).check()
    assert r.kind == "lost-update" and len(r.cycle) == 2
    assert "T1 -rw(y)-> T2" in r.render()


def test_reported_cycle_is_the_short_one():
    """With a 50-cycle and a write-skew 2-cycle through T0, the 2-cycle is reported."""
    n = 50
    txns = [(0, [("a", n), ("y", 0)], [("a", 1)])]  # reads the last a: closes a long cycle
    txns += [(i, [], [("a", i + 1)]) for i in range(1, n)]
    txns.append((n, [("a", 0)], [("y", 1)]))
    r = hist(*txns).check()
    assert r.kind == "G2-item"
    assert r.cycle == [Edge(0, n, "rw", "y"), Edge(n, 0, "rw", "a")]


def test_very_long_cycle_needs_no_recursion():
    """A 20000-transaction ww chain closed by one read is found without deep recursion."""
    n = 20_000
    h = History()
    h.commit(0, [("k", n - 1)], [("k", 1)])
    for i in range(1, n - 1):
        h.commit(i, [], [("k", i + 1)])
    r = h.check()
    assert r.kind == "G1c" and len(r.cycle) == n - 1


def test_render_prints_each_edge_on_its_own_line():
    """The report names the anomaly and prints edges like 'T1 -rw(x)-> T2'."""
    r = hist((1, [("x", 0)], [("x", 1)]), (2, [("x", 0)], [("x", 2)])).check()
    assert r.render().splitlines()[1:] == [
        f"anomaly: {r.anomaly}",
        "cycle (2 edges):",
        "  T1 -ww(x)-> T2   T1 installed version 1, T2 installed version 2",
        "  T2 -rw(x)-> T1   T2 read version 0, T1 installed version 1",
    ]
    assert format_edge(Edge("c7", 40, "rw", ("acct", 7))) == 'c7 -rw(["acct",7])-> T40'


# -- recorder ---------------------------------------------------------------------------


@pytest.mark.parametrize("txn_id, reads, writes, message", [
    (1, [("x", -1)], [], "reads[0][1]: an integer version >= 0, got -1"),
    (1, [], [("x", 0)], "writes[0][1]: an integer version >= 1"),
    (1, [("x", True)], [], "reads[0][1]: an integer version >= 0, got true"),
    (1, [(None, 1)], [], "reads[0][0]: a key"),
    (1, [("x", 1, 2)], [], "reads[0]: a [key, version] pair"),
    (1, [], [("x", 1), ("x", 1)], "writes[1]: a (key, version) installed once"),
    (1.5, [], [], "id: a transaction id"),
])
def test_commit_rejects_malformed_records_and_changes_nothing(txn_id, reads, writes,
                                                              message):
    """A malformed commit raises ValueError naming the field and leaves no trace."""
    h = hist((0, [("x", 0)], [("x", 1)]))
    with pytest.raises(ValueError, match=re.escape(message)):
        h.commit(txn_id, reads, writes)
    assert len(h) == 1 and list(h.transactions()) == [(0, [("x", 0)], [("x", 1)])]


def test_commit_rejects_a_duplicate_id():
    """Transaction ids are unique among committed transactions."""
    h = hist((7, [], []))
    with pytest.raises(ValueError, match="already committed"):
        h.commit(7, [], [])


def test_jsonl_round_trip_keeps_transactions_keys_and_aborts(tmp_path):
    """to_jsonl then from_jsonl gives back the same transactions and abort count."""
    h = hist((1, [("x", 0), (("acct", [1, 2]), 0)], [("x", 1)]),
             ("c2", [("x", 1)], [(("acct", (1, 2)), 1), (5, 1)]),
             aborted=[3, "c4"])
    path = str(tmp_path / "h.jsonl")
    h.to_jsonl(path)
    back = History.from_jsonl(path)
    assert list(back.transactions()) == list(h.transactions())
    assert back.aborted == 2
    first = json.loads(open(path).readline())
    assert first == {"id": 1, "reads": [["x", 0], [["acct", [1, 2]], 0]],
                     "writes": [["x", 1]]}


# -- command line -----------------------------------------------------------------------

GOOD = '{"id": 1, "reads": [["x", 0]], "writes": [["x", 1]]}'


def test_cli_exit_0_prints_one_summary_line(tmp_path, capsys):
    """A serializable file exits 0 with a one-line summary."""
    path = write_lines(tmp_path / "hist.jsonl", GOOD, "",
                       '{"id": 2, "reads": [["x", 1]], "writes": []}',
                       '{"id": 3, "aborted": true}',
                       '{"id": 4, "reads": [], "writes": [], "aborted": false}')
    assert cli(["check-history", path]) == 0
    out = capsys.readouterr().out
    assert out == (f"{path}: serializable: 3 committed transactions (1 aborted), 1 keys, "
                   "2 reads, 1 writes, 1 dependency edges (ww 0, wr 1, rw 0)\n")


def test_cli_exit_1_prints_the_cycle(tmp_path, capsys):
    """A write skew exits 1 and prints the cycle edge by edge."""
    path = write_lines(tmp_path / "hist.jsonl",
                       '{"id": 12, "reads": [["acct:7", 0], ["acct:9", 0]], '
                       '"writes": [["acct:9", 1]]}',
                       '{"id": 40, "reads": [["acct:7", 0], ["acct:9", 0]], '
                       '"writes": [["acct:7", 1]]}')
    assert cli(["check-history", path]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: NOT serializable (G2-item)")
    assert "  T12 -rw(acct:7)-> T40   T12 read version 0, T40 installed version 1" in out
    assert "  T40 -rw(acct:9)-> T12   T40 read version 0, T12 installed version 1" in out


def test_cli_reads_stdin_for_dash(monkeypatch, capsys):
    """'-' reads the history from standard input."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO((GOOD + "\n").encode())))
    assert cli(["check-history", "-"]) == 0
    assert capsys.readouterr().out.startswith("<stdin>: serializable: 1 committed")


def test_cli_help_exits_0(capsys):
    """--help prints the usage and exits 0."""
    assert cli(["check-history", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: rnicsim check-history FILE")


@pytest.mark.parametrize("line, where", [
    ('{"id": 2, "reads": [["x", 0], ["y", -1]], "writes": []}',
     "reads[1][1]: an integer version >= 0, got -1"),
    ('{"id": 2, "reads": [], "writes": [["x", 2], ["y", 0]]}',
     "writes[1][1]: an integer version >= 1 (version 0 is the initial value), got 0"),
    ('{"id": 2, "reads": [["x", "3"]], "writes": []}',
     'reads[0][1]: an integer version >= 0, got "3"'),
    ('{"id": 2, "reads": [[{"a": 1}, 1]], "writes": []}', "reads[0][0]: a key: a string"),
    ('{"id": 2, "reads": [["x"]], "writes": []}',
     'reads[0]: a [key, version] pair, got ["x"]'),
    ('{"id": 2, "reads": "x", "writes": []}',
     'reads: a list of [key, version] pairs, got "x"'),
    ('{"id": 2, "reads": []}', "writes: a list of [key, version] pairs (the key is missing)"),
    ('{"reads": [], "writes": []}', "id: a transaction id (the key is missing)"),
    ('{"id": [2], "reads": [], "writes": []}', "id: a transaction id: a string or an integer"),
    ('{"id": 2, "reads": [], "writes": [], "when": 5}', "when: no such key; allowed keys"),
    ('{"id": 1, "reads": [], "writes": []}',
     "id: a unique transaction id; 1 already committed on line 1"),
    ('{"id": 2, "aborted": "yes"}', 'aborted: true or false, got "yes"'),
    ('{"id": 2, "aborted": true, "reads": []}', "reads: nothing: an aborted transaction"),
    ('{"id": 2, "reads": [], "writes": [["x", 2], ["x", 2]]}',
     "writes[1]: a (key, version) installed once per transaction; writes[0] is the same"),
    ('[1, 2]', "a JSON object with keys id, reads, writes, got [1, 2]"),
    ('{"id": 2, "reads": [', "one JSON object per line (Expecting value"),
])
def test_cli_malformed_line_exits_2_naming_file_line_and_key(tmp_path, capsys, line, where):
    """Each malformed line exits 2 with 'FILE:LINE: KEY.PATH: expected' on stderr."""
    path = write_lines(tmp_path / "hist.jsonl", GOOD, line)
    assert cli(["check-history", path]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith(f"rnicsim check-history: error: {path}:2: {where}")
    assert cap.err.endswith("\n") and "Traceback" not in cap.err


def test_cli_non_utf8_line_exits_2(tmp_path, capsys):
    """Bytes that are not UTF-8 name their line."""
    p = tmp_path / "hist.jsonl"
    p.write_bytes(GOOD.encode() + b"\n\xff\xfe\n")
    assert cli(["check-history", str(p)]) == 2
    assert f"{p}:2: UTF-8 text" in capsys.readouterr().err


def test_cli_missing_file_exits_2(tmp_path, capsys):
    """A missing file is an input error naming the file."""
    path = str(tmp_path / "nope.jsonl")
    assert cli(["check-history", path]) == 2
    assert capsys.readouterr().err == (f"rnicsim check-history: error: {path}: a readable "
                                       "JSON-lines history file (No such file or directory)\n")


@pytest.mark.parametrize("argv, message", [
    ([], "command line: exactly one history FILE"),
    (["a.jsonl", "b.jsonl"], "command line: exactly one history FILE"),
    (["--json", "a.jsonl"], "command line: --json: no such option"),
])
def test_cli_bad_arguments_exit_2(argv, message, capsys):
    """Wrong argument counts and unknown options are input errors."""
    assert cli(["check-history", *argv]) == 2
    assert message in capsys.readouterr().err


# -- Python API mistakes ------------------------------------------------------------------

def test_commit_with_reads_none_names_the_field():
    """reads=None is a ValueError naming ``reads``, not a bare 'NoneType is not iterable'."""
    with pytest.raises(ValueError, match=r"History.commit\(1\): reads: a list of \[key, "
                                         r"version\] pairs, got null"):
        History().commit(1, None, [])


def test_from_lines_accepts_one_whole_text():
    """A str (or bytes) holding the whole JSON-lines text is split into lines rather than
    read character by character."""
    text = ('{"id": 1, "reads": [["x", 0]], "writes": [["x", 1]]}\n'
            '{"id": 2, "reads": [["x", 0]], "writes": [["x", 1]]}\n')
    for lines in (text, text.encode()):
        res = History.from_lines(lines, "h.jsonl").check()
        assert (len(History.from_lines(lines, "h.jsonl")), res.kind) == (2, "lost-update")


def test_a_field_repeated_in_one_line_is_malformed(tmp_path, capsys):
    """{"id": 1, "id": 2, ...} is rejected naming the line and field (exit 2), not read
    as transaction 2."""
    path = write_lines(tmp_path / "h.jsonl",
                       '{"id": 1, "reads": [], "writes": [["x", 1]]}',
                       '{"id": 1, "id": 2, "reads": [], "writes": [["x", 2]]}')
    with pytest.raises(InputError, match=r"h.jsonl:2: id: a key given once per line"):
        History.from_jsonl(path)
    assert cli(["check-history", path]) == 2
    assert "h.jsonl:2: id: a key given once per line" in capsys.readouterr().err
