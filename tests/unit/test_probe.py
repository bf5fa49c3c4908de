"""calibration/probe: rnicsim-probe builds with -Werror, its device-free unit tests pass,
its command line behaves without RDMA hardware (help, no device, bad flags), and a
client and a server built on fakeverbs.c (a stand-in verbs library) run every sweep
over loopback into a file that calibration.parsers accepts.

The probe is built in a temporary copy of calibration/probe, so parallel runs and other
work in the checkout never see half-built objects. The module skips only when the
libibverbs headers are missing AND the environment variable CI is not "true"; under CI
(`.ci/run` installs libibverbs-dev) a missing header is a failure.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE_SRC = REPO / "calibration" / "probe"
UNDER_CI = os.environ.get("CI") == "true"


def _cc() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _have_verbs_header() -> bool:
    cc = _cc()
    if cc is None:
        return False
    try:
        r = subprocess.run([cc, "-E", "-x", "c", "-"], input="#include <infiniband/verbs.h>\n",
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


HAVE_TOOLS = _cc() is not None and shutil.which("make") is not None
HAVE_VERBS = HAVE_TOOLS and _have_verbs_header()

pytestmark = pytest.mark.skipif(
    not HAVE_VERBS and not UNDER_CI,
    reason="infiniband/verbs.h (or cc/make) not found: install libibverbs-dev to build "
    "rnicsim-probe (under CI=true this test runs and fails instead of skipping)",
)

ENV = {**os.environ, "LC_ALL": "C"}


def _run(args, cwd=None, timeout=120):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    """A private copy of the probe sources."""
    d = tmp_path_factory.mktemp("probe")
    for f in PROBE_SRC.iterdir():
        if f.is_file() and (f.suffix in (".c", ".h", ".md") or f.name == "Makefile"):
            shutil.copy2(f, d / f.name)
    return d


@pytest.fixture(scope="module")
def probe(build_dir: Path) -> Path:
    assert HAVE_VERBS, "infiniband/verbs.h is missing: apt-get install libibverbs-dev"
    r = _run(["make", "-C", str(build_dir)], timeout=300)
    assert r.returncode == 0, f"make failed:\n{r.stdout}\n{r.stderr}"
    exe = build_dir / "rnicsim-probe"
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe


def _rdma_devices() -> list[str]:
    d = Path("/sys/class/infiniband")
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_sources_are_all_there():
    for name in ("probe.c", "client.c", "server.c", "rdma.c", "args.c", "args.h", "stats.c",
                 "stats.h", "jsonout.c", "jsonout.h", "net.c", "proto.c", "hostinfo.c",
                 "util.c", "wire.c", "plan.c", "plan.h", "coro.c", "coro.h", "test_probe.c",
                 "fakeverbs.c",
                 "Makefile", "SCHEMA.md"):
        assert (PROBE_SRC / name).is_file(), name


def test_every_compile_uses_the_strict_flags(build_dir: Path):
    if not HAVE_TOOLS:
        pytest.fail("cc and make are required")
    r = _run(["make", "-C", str(build_dir), "-n", "-B", "rnicsim-probe", "test_probe"])
    assert r.returncode == 0, r.stderr
    compiles = [ln for ln in r.stdout.splitlines() if " -c " in ln]
    links = [ln for ln in r.stdout.splitlines() if " -o rnicsim-probe " in ln + " "]
    assert len(compiles) >= 12
    for ln in compiles:
        for flag in ("-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"):
            assert flag in ln.split(), (flag, ln)
    assert links and "-libverbs" in links[0]


def test_build_and_unit_tests(probe: Path, build_dir: Path):
    r = _run(["make", "-C", str(build_dir), "test"], timeout=300)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert ", 0 failures" in r.stdout
    checks = int(r.stdout.split("test_probe: ")[1].split()[0])
    assert checks >= 200


def test_help_exits_0(probe: Path):
    r = _run([str(probe), "--help"], timeout=30)
    assert r.returncode == 0
    assert r.stdout.startswith("usage: rnicsim-probe --server")
    for word in ("--client HOST", "--out", "--sweeps", "--iters", "--time-limit", "--port",
                 "--dev", "--qps-threads N",
                 "lat,bw,qps,threads,depth,batch,signal,inline,atomics,pages,", "coro",
                 "rpc (two-sided RPCs",
                 "arb (a 64-B WRITE posted 2 us after a large WRITE on another QP: "
                 "transmit arbitration)\n"):
        assert word in r.stdout, word
    assert r.stderr == ""
    assert _run([str(probe), "-h"], timeout=30).returncode == 0


@pytest.mark.parametrize("role", [["--client", "127.0.0.1"], ["--server"]])
def test_no_rdma_device_exits_2_with_one_line(probe: Path, tmp_path: Path, role):
    out = tmp_path / "out.jsonl"
    args = [str(probe), *role, "--connect-timeout", "1"]
    if role[0] == "--client":
        args += ["--out", str(out)]
    if _rdma_devices():
        if role[0] == "--server":
            pytest.skip("this machine has an RDMA device; the server would start listening")
        # with hardware the client gets as far as the (absent) peer: still exit 2, bounded
        r = _run(args, timeout=60)
        assert r.returncode == 2
        assert r.stderr.startswith("rnicsim-probe: ") and "cannot connect" in r.stderr
        return
    r = _run(args, timeout=60)
    assert r.returncode == 2
    assert r.stderr == "rnicsim-probe: no RDMA device found\n"
    assert r.stdout == ""
    assert not out.exists()


def test_unknown_device_name(probe: Path):
    r = _run([str(probe), "--client", "127.0.0.1", "--dev", "nosuch_0"], timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("rnicsim-probe: ")


@pytest.mark.parametrize("args,message", [
    (["--bogus"], "unknown option '--bogus'"),
    ([], "one of --server or --client HOST is required"),
    (["--client"], "--client needs a value"),
    (["--server", "--client", "h"], "choose one of --server or --client HOST"),
    (["--server", "--port", "0"], "--port: expected an integer in 1..65535, got 0"),
    (["--client", "h", "--iters", "ten"], "--iters: expected an integer, got 'ten'"),
    (["--client", "h", "--time-limit", "-1"], "--time-limit"),
    (["--client", "h", "--sweeps", "lat,nope"], "unknown sweep 'nope'"),
    (["--client", "h", "--sweeps", "rpcs"], "pages, coro, rpc, arb)"),
    (["--client", "h", "--sweeps", "arbs"], "unknown sweep 'arbs'"),
    (["--server", "--out", "x.jsonl"], "--out is a client option"),
    (["--client", "h", "stray"], "unexpected argument 'stray'"),
    (["--client", "h", "--qps-threads", "0"],
     "--qps-threads: expected an integer in 1..1024, got 0"),
    (["--client", "h", "--max-qps", "2", "--qps-threads", "4"],
     "--qps-threads 4 needs at least 4 QPs, but --max-qps is 2"),
    (["--server", "--qps-threads", "4"], "--qps-threads is a client option"),
])
def test_bad_flags_exit_2_with_usage(probe: Path, args, message):
    r = _run([str(probe), *args], timeout=30)
    assert r.returncode == 2
    first = r.stderr.splitlines()[0]
    assert first.startswith("rnicsim-probe: ") and message in first, r.stderr
    assert "usage: rnicsim-probe" in r.stderr
    assert r.stdout == ""


# ---- end to end on the fake verbs library ------------------------------------------------


@pytest.fixture(scope="module")
def fake_probe(build_dir: Path) -> Path:
    assert HAVE_VERBS, "infiniband/verbs.h is missing: apt-get install libibverbs-dev"
    r = _run(["make", "-C", str(build_dir), "rnicsim-probe-fake"], timeout=300)
    assert r.returncode == 0, f"make rnicsim-probe-fake failed:\n{r.stdout}\n{r.stderr}"
    return build_dir / "rnicsim-probe-fake"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(exe: Path, port: int, *extra: str,
                  env: dict | None = None) -> subprocess.Popen:
    srv = subprocess.Popen([str(exe), "--server", "--port", str(port), *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env or ENV)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # wait until it listens
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if srv.poll() is not None:
                break
            time.sleep(0.05)
    # that probe connection was a client without HELLO: the server drops it and goes on
    return srv


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()  # by its own handle, i.e. by pid
    proc.communicate(timeout=30)


QUICK = ["--iters", "20", "--bw-iters", "400", "--time-limit", "0.3", "--max-qps", "64",
         "--max-threads", "2", "--region-mb", "8", "--connect-timeout", "5"]


def test_end_to_end_all_sweeps_on_fake_verbs(fake_probe: Path, tmp_path: Path):
    from calibration.parsers import load_measurements, parse_probe_jsonl

    port = _free_port()
    srv = _start_server(fake_probe, port)
    out = tmp_path / "probe.jsonl"
    try:
        r = _run([str(fake_probe), "--client", "127.0.0.1", "--port", str(port), "--out",
                  str(out), *QUICK], timeout=240)
    finally:
        _stop(srv)
    assert r.returncode == 0, r.stderr
    assert "done:" in r.stderr and r.stdout == ""
    run = parse_probe_jsonl(out.read_text(encoding="utf-8"), str(out))
    # `all` includes the coro sweep (3 switch lines and 12 points), the rpc one and, last,
    # the arb one
    assert run.header["args"]["sweeps"][-3:] == ["coro", "rpc", "arb"]
    assert [w["coroutines"] for w in run.switches] == [1, 2, 32]
    coro = [m for m in run.measurements if m["sweep"] == "coro"]
    assert len(coro) + sum(s["sweep"] == "coro" for s in run.skips) == 12
    assert run.complete
    assert set(run.devices) == set(run.links) == set(run.hosts) == {"client", "server"}
    assert run.links["client"]["link_layer"] == "IB" and run.header["path_mtu"] == 4096
    # on a loaded machine a point may see no sample before its time limit; nothing else
    assert all("time limit" in s["reason"] or "no echo came back" in s["reason"]
               for s in run.skips), [s["reason"] for s in run.skips]
    sweeps = {m["sweep"] for m in run.measurements}
    assert sweeps == {"lat", "bw", "qps", "threads", "depth", "batch", "signal", "inline",
                      "atomics", "pages", "coro", "rpc", "arb"}
    rpc = [m for m in run.measurements if m["sweep"] == "rpc"]
    assert len(rpc) + sum(s["sweep"] == "rpc" for s in run.skips) == 28
    # the points in file order: the rpc sweep's, then, last, the arb sweep's 4
    points = sorted([*run.measurements, *run.skips], key=lambda m: m["_line"])
    assert [m["sweep"] for m in points[-32:]] == ["rpc"] * 28 + ["arb"] * 4
    assert [m["behind"] for m in points[-4:]] == ARB_BEHIND
    kinds = {(m["verb"], m["transport"], m["method"]) for m in run.measurements
             if m["sweep"] == "lat"}
    assert kinds == {("READ", "RC", "post_to_cqe"), ("WRITE", "RC", "post_to_cqe"),
                     ("SEND", "RC", "pingpong"), ("SEND", "UD", "pingpong"),
                     ("CAS", "RC", "post_to_cqe"), ("FAA", "RC", "post_to_cqe")}
    ud = [m for m in run.measurements if m["transport"] == "UD"]
    assert max(m["payload"] for m in ud) == 4096  # a UD message fits one MTU
    qps = sorted(m["qps"] for m in [*run.measurements, *run.skips] if m["sweep"] == "qps")
    assert qps[-1] == 64 or len(qps) < 7
    # every QP count of the qps sweep: a latency point (QPs taking turns) and a throughput one
    by_n: dict = {}
    for m in run.measurements:
        if m["sweep"] == "qps":
            by_n.setdefault(m["qps"], set()).add((m["method"], m["verb"], m["payload"]))
    assert by_n and all(v == {("post_to_cqe", "READ", 32), ("throughput", "READ", 32)}
                        for n, v in by_n.items() if n < max(by_n)), by_n
    assert {m["page_size"] for m in run.measurements if m["sweep"] == "pages"} == {4096, 2097152}
    assert run.end["points"] == len(run.measurements)   # switch lines are not points
    ms = load_measurements([out])
    assert {m.tool for m in ms} == {"rnicsim-probe"} and len(ms) > 500
    assert sum(m.kind == "switch" for m in ms) == 3


# every key of a coro measurement (SCHEMA.md): the standard ones, the throughput ones and
# the coro sweep's own
CORO_KEYS = {"type", "sweep", "verb", "transport", "method", "payload", "qps", "threads",
             "depth", "batch", "signal_every", "inline", "page_size", "page_backing",
             "region_bytes", "addresses", "random_offsets", "iters", "elapsed_s",
             "truncated", "mops", "gbps", "coroutines", "cq_layout", "switch_impl",
             "polls_per_op", "empty_poll_fraction"}
SWITCH_KEYS = {"type", "switch_impl", "coroutines", "iters", "elapsed_s", "ns_per_switch"}
CORO_POINTS = [(k, layout) for k in (1, 2, 4, 8, 16, 32) for layout in ("shared", "per_qp")]


def _client_run(fake_probe: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """A fake-verbs server on a free port, one client run writing ``out`` with ``args``
    (sweeps and limits), the server stopped; the client's completed process."""
    port = _free_port()
    srv = _start_server(fake_probe, port)
    try:
        return _run([str(fake_probe), "--client", "127.0.0.1", "--port", str(port), "--out",
                     str(out), *args], timeout=240)
    finally:
        _stop(srv)


def _run_coro(fake_probe: Path, tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "coro.jsonl"
    r = _client_run(fake_probe, out, "--sweeps", "coro", *args)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(ln) for ln in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "probe" and lines[0]["args"]["sweeps"] == ["coro"]
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "ok", lines[-1]
    return lines


def test_end_to_end_coro_sweep_on_fake_verbs(fake_probe: Path, tmp_path: Path):
    """--sweeps coro: three bare switch lines (1, 2, 32 coroutines, no RDMA), then a READ
    point for 1 .. 32 coroutines, each with its own QP, their completions polled through
    one shared CQ and through a CQ per QP. The fake verbs complete a READ as it is posted,
    on the send CQ its QP was created with: per-QP polling never comes back empty (one
    poll per READ), a shared CQ hands the scheduler min(K, 16) completions per poll. A
    completion on the wrong CQ would strand its coroutine (a skip: no completion within
    5 s); a coroutine reading outside its 64-B local slot fails the fake's lkey check."""
    lines = _run_coro(fake_probe, tmp_path, "--bw-iters", "400", "--time-limit", "5")
    types = [ln["type"] for ln in lines]
    assert "skip" not in types, [ln for ln in lines if ln["type"] == "skip"]
    sw = [ln for ln in lines if ln["type"] == "switch"]
    ms = [ln for ln in lines if ln["type"] == "measurement"]
    assert len(sw) == 3 and len(ms) == 12
    # the bare switch first, then the RDMA points
    assert max(i for i, t in enumerate(types) if t == "switch") < types.index("measurement")
    impl = "asm" if platform.machine() in ("x86_64", "aarch64") else "ucontext"
    assert [s["coroutines"] for s in sw] == [1, 2, 32]
    for s in sw:
        assert set(s) == SWITCH_KEYS, s
        assert s["switch_impl"] == impl and s["iters"] == 1_000_000
        assert s["elapsed_s"] > 0 and s["ns_per_switch"] > 0
        assert abs(s["ns_per_switch"] - s["elapsed_s"] * 1e9 / 1e6) <= 1e-6 * s["ns_per_switch"]
    assert [(m["coroutines"], m["cq_layout"]) for m in ms] == CORO_POINTS
    for m in ms:
        k = m["coroutines"]
        assert set(m) == CORO_KEYS, set(m) ^ CORO_KEYS
        assert (m["sweep"], m["verb"], m["transport"], m["method"]) == \
            ("coro", "READ", "RC", "throughput")
        assert (m["payload"], m["qps"], m["threads"], m["depth"], m["batch"],
                m["signal_every"], m["inline"], m["addresses"], m["random_offsets"]) == \
            (64, k, 1, 1, 1, 1, False, k, False)
        assert m["page_size"] == 4096 and m["page_backing"] == "base"
        assert m["region_bytes"] >= 64 * k  # slot k at offset 64 x k
        # every point completed its iterations
        assert m["iters"] == 400 and not m["truncated"], m
        assert m["elapsed_s"] > 0 and m["mops"] > 0
        assert m["gbps"] == pytest.approx(m["mops"] * 64 * 8 / 1000, rel=1e-9)
        assert m["switch_impl"] == impl
        assert 0 <= m["empty_poll_fraction"] <= 1
        if m["cq_layout"] == "per_qp":
            assert m["polls_per_op"] >= 1
            assert m["polls_per_op"] == 1 and m["empty_poll_fraction"] == 0, m
        else:
            assert m["polls_per_op"] > 0
            assert m["polls_per_op"] == pytest.approx(1 / min(k, 16), rel=0.1), m
    assert lines[-1]["points"] == 12 and lines[-1]["skipped"] == 0


def test_end_to_end_coro_sweep_stops_at_the_time_limit(fake_probe: Path, tmp_path: Path):
    """A --bw-iters no point reaches: each coro point stops posting at --time-limit, its
    READs in flight complete and are counted, and the run goes on to the next point."""
    lines = _run_coro(fake_probe, tmp_path, "--bw-iters", "1000000000", "--time-limit", "0.2")
    ms = [ln for ln in lines if ln["type"] == "measurement"]
    assert [(m["coroutines"], m["cq_layout"]) for m in ms] == CORO_POINTS
    for m in ms:
        assert m["truncated"] and 0 < m["iters"] < 1_000_000_000, m
        assert m["elapsed_s"] < 1.0 and m["polls_per_op"] > 0


# every key of an rpc measurement (SCHEMA.md): the standard ones, the throughput ones and
# the lost echoes
RPC_KEYS = {"type", "sweep", "verb", "transport", "method", "payload", "qps", "threads",
            "depth", "batch", "signal_every", "inline", "page_size", "page_backing",
            "region_bytes", "addresses", "random_offsets", "iters", "elapsed_s",
            "truncated", "mops", "gbps", "lost"}
# (window W, batch B, payload) in run order, for UD then RC (the fake's path MTU is 4096)
RPC_SHAPES = ([(w, 1, 64) for w in (1, 2, 4, 8, 16, 32, 64)] +
              [(w, w, 64) for w in (4, 16, 64)] +
              [(16, 1, p) for p in (16, 256, 1024, 4096)])
RPC_POINTS = [(tp, *shape) for tp in ("UD", "RC") for shape in RPC_SHAPES]


def _run_rpc(fake_probe: Path, out: Path, *args: str, server_env: dict | None = None):
    """--sweeps rpc against a fake-verbs server (started with ``server_env``); the parsed
    run and the raw lines."""
    from calibration.parsers import parse_probe_jsonl

    port = _free_port()
    srv = _start_server(fake_probe, port, env=server_env)
    try:
        r = _run([str(fake_probe), "--client", "127.0.0.1", "--port", str(port), "--out",
                  str(out), "--sweeps", "rpc", *args], timeout=240)
    finally:
        _stop(srv)
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    run = parse_probe_jsonl(text, str(out))
    assert run.header["args"]["sweeps"] == ["rpc"] and run.complete
    assert run.end["status"] == "ok"
    return run, [json.loads(ln) for ln in text.splitlines()]


def test_end_to_end_rpc_sweep_on_fake_verbs(fake_probe: Path, tmp_path: Path):
    """--sweeps rpc: a window of W SEND_WITH_IMM requests in flight from one thread on one
    QP, posted in lists of B with the last WR signaled, each echoed by the server; UD then
    RC, 14 points each. The fake verbs check the send-queue accounting (a full queue fails
    the post), the linked lists, the immediate data the echo carries back (an echo that
    answers no request in flight skips an RC point) and the receives (every echo needs
    one); they lose no UD message, so every echo comes back and nothing counts as lost.
    The file parses with calibration.parsers."""
    from calibration.parsers import load_measurements

    out = tmp_path / "rpc.jsonl"
    run, lines = _run_rpc(fake_probe, out, "--bw-iters", "512", "--time-limit", "5",
                          "--connect-timeout", "5")
    assert not run.skips, [s["reason"] for s in run.skips]
    assert len(run.measurements) == 28
    ms = [ln for ln in lines if ln["type"] == "measurement"]   # as written, key for key
    assert [(m["transport"], m["depth"], m["batch"], m["payload"]) for m in ms] == RPC_POINTS
    for m in ms:
        assert set(m) == RPC_KEYS, set(m) ^ RPC_KEYS
        assert (m["sweep"], m["verb"], m["method"]) == ("rpc", "SEND", "throughput")
        assert (m["qps"], m["threads"], m["addresses"], m["random_offsets"]) == (1, 1, 1, False)
        assert m["signal_every"] == m["batch"] and m["depth"] % m["batch"] == 0
        assert m["inline"] == (m["payload"] <= 256), m
        assert m["page_size"] == 4096 and m["page_backing"] == "base"
        assert m["region_bytes"] >= m["payload"]
        # every echo of the timed phase came back (512 is a whole number of lists)
        assert m["iters"] == 512 and not m["truncated"] and m["lost"] == 0, m
        assert m["elapsed_s"] > 0 and m["mops"] > 0
        assert m["mops"] == pytest.approx(512 / m["elapsed_s"] / 1e6, rel=1e-6)
        assert m["gbps"] == pytest.approx(m["mops"] * m["payload"] * 8 / 1000, rel=1e-9)
    # the lines in order: header, 6 info lines, the 28 points, the end
    assert [ln["type"] for ln in lines[7:-1]] == ["measurement"] * 28
    assert lines[-1]["points"] == 28 and lines[-1]["skipped"] == 0
    loaded = load_measurements([out])
    assert {m.sweep for m in loaded} == {"rpc"} and all(m.lost == 0 for m in loaded)


def test_end_to_end_rpc_sweep_counts_lost_ud_echoes(fake_probe: Path, tmp_path: Path):
    """A server whose wire loses every 150th UD SEND it posts (its echoes): a UD request
    whose echo has not come back within 200 ms counts in `lost` and frees its window
    slot; the point still completes its echoes (the lost ones are replaced) and its time
    includes the wait. RC points are unaffected (the fake never loses RC messages)."""
    out = tmp_path / "rpc-lossy.jsonl"
    run, _ = _run_rpc(fake_probe, out, "--bw-iters", "256", "--time-limit", "5",
                      "--connect-timeout", "5",
                      server_env={**ENV, "FAKEVERBS_UD_DROP_EVERY": "150"})
    assert not run.skips, [s["reason"] for s in run.skips]
    ms = run.measurements
    assert [(m["transport"], m["depth"], m["batch"], m["payload"]) for m in ms] == RPC_POINTS
    ud = [m for m in ms if m["transport"] == "UD"]
    rc = [m for m in ms if m["transport"] == "RC"]
    # about 14 x (256 + warm-up) echoes, one in 150 lost: most UD points lose one
    assert sum(m["lost"] for m in ud) >= 5, [m["lost"] for m in ud]
    for m in ud:
        assert not m["truncated"], m
        # lost ones are replaced by whole lists: at most B - 1 echoes more than asked
        assert 256 <= m["iters"] < 256 + m["batch"], m
        if m["lost"] and m["depth"] == 1:
            assert m["elapsed_s"] >= 0.2, m      # the one request in flight waited 200 ms
    for m in rc:
        assert m["lost"] == 0 and m["iters"] == 256 and not m["truncated"], m


def test_end_to_end_rpc_sweep_stops_at_the_time_limit(fake_probe: Path, tmp_path: Path):
    """A --bw-iters no point reaches: each rpc point stops posting at --time-limit, the
    requests in flight come back and count, and the run goes on to the next point."""
    out = tmp_path / "rpc-limit.jsonl"
    run, _ = _run_rpc(fake_probe, out, "--bw-iters", "1000000000", "--time-limit", "0.1")
    ms = run.measurements
    assert [(m["transport"], m["depth"], m["batch"], m["payload"]) for m in ms] == RPC_POINTS
    for m in ms:
        assert m["truncated"] and 0 < m["iters"] < 1_000_000_000, m
        assert m["elapsed_s"] < 1.0 and m["lost"] == 0 and m["mops"] > 0, m


# every key of an arb measurement (SCHEMA.md): the standard ones, the latency ones, the
# bytes of the large WRITE the timed one was posted behind and the gap between the posts
ARB_KEYS = {"type", "sweep", "verb", "transport", "method", "payload", "qps", "threads",
            "depth", "batch", "signal_every", "inline", "page_size", "page_backing",
            "region_bytes", "addresses", "random_offsets", "iters", "elapsed_s",
            "truncated", "lat_us", "lat_convention", "behind", "gap_us"}
ARB_BEHIND = [0, 65536, 262144, 1048576]


def _run_arb(fake_probe: Path, out: Path, *args: str, client_env: dict | None = None):
    """--sweeps arb against a fake-verbs server, the client started with ``client_env``;
    the parsed run and the raw lines."""
    from calibration.parsers import parse_probe_jsonl

    port = _free_port()
    srv = _start_server(fake_probe, port)
    try:
        r = subprocess.run([str(fake_probe), "--client", "127.0.0.1", "--port", str(port),
                            "--out", str(out), "--sweeps", "arb", *args],
                           capture_output=True, text=True, timeout=240, env=client_env or ENV)
    finally:
        _stop(srv)
    assert r.returncode == 0, r.stderr
    # a progress line per point, as for the other latency points
    assert r.stderr.count("[arb] WRITE RC 64 B qps 2") == 4, r.stderr
    text = out.read_text(encoding="utf-8")
    run = parse_probe_jsonl(text, str(out))
    assert run.header["args"]["sweeps"] == ["arb"] and run.complete
    assert run.end["status"] == "ok"
    return run, [json.loads(ln) for ln in text.splitlines()]


@pytest.mark.parametrize("order", ["large_first", "small_first"])
def test_end_to_end_arb_sweep_on_fake_verbs(fake_probe: Path, tmp_path: Path, order: str):
    """--sweeps arb: a 64-B WRITE on QP 1 timed from its post to its completion, posted
    right after a WRITE of `behind` bytes (0, 4 KiB, 64 KiB, 1 MiB) on QP 0, both QPs on
    one send CQ, each iteration waiting for both completions. The fake verbs complete a
    WRITE as it is posted (the large one's completion first) or, with
    FAKEVERBS_LATE_WRITE_BYTES, hold a large WRITE's completion back until the CQ is
    otherwise empty (the 64-B one's first, as on a NIC that interleaves packets): the probe
    tells them apart by wr_id either way (a stray completion, or one it never waits for,
    would skip a point or strand the next iteration). The large WRITE reads a local region
    the fake's lkey check covers; the small WRITE is posted 2 us after the large one's
    post began (a spin; the same when it goes alone), and that gap is reported
    (`gap_us`). The file parses with calibration.parsers."""
    from calibration.parsers import load_measurements

    env = {**ENV, "FAKEVERBS_LATE_WRITE_BYTES": "4096"} if order == "small_first" else ENV
    out = tmp_path / f"arb-{order}.jsonl"
    run, lines = _run_arb(fake_probe, out, "--iters", "50", "--time-limit", "5",
                          "--connect-timeout", "5", client_env=env)
    assert not run.skips, [s["reason"] for s in run.skips]
    ms = [ln for ln in lines if ln["type"] == "measurement"]   # as written, key for key
    assert [m["behind"] for m in ms] == ARB_BEHIND
    for m in ms:
        assert set(m) == ARB_KEYS, set(m) ^ ARB_KEYS
        assert (m["sweep"], m["verb"], m["transport"], m["method"]) == \
            ("arb", "WRITE", "RC", "post_to_cqe")
        assert (m["payload"], m["qps"], m["threads"], m["depth"], m["batch"],
                m["signal_every"], m["inline"], m["addresses"], m["random_offsets"]) == \
            (64, 2, 1, 1, 1, 1, False, 1, False)
        assert m["page_size"] == 4096 and m["page_backing"] == "base"
        # the server's region holds the large WRITE (from offset 4096) in whole pages
        assert m["region_bytes"] == 4096 + -(-m["behind"] // 4096) * 4096, m
        assert m["iters"] == 50 and not m["truncated"] and m["elapsed_s"] > 0, m
        lat = m["lat_us"]
        assert set(lat) == {"min", "median", "avg", "stdev", "p99", "p999", "max"}
        assert 0 < lat["min"] <= lat["median"] <= lat["max"], lat
        assert lat["min"] <= lat["avg"] <= lat["max"] and lat["stdev"] >= 0, lat
        assert lat["median"] <= lat["p99"] <= lat["p999"] <= lat["max"], lat
        assert m["lat_convention"] == "rtt"
        # the probe spins 2 us from the start of the iteration to the small WRITE's post
        assert m["gap_us"] >= 2.0, m
    # the lines in order: header, 6 info lines, the 4 points, the end
    assert [ln["type"] for ln in lines[7:-1]] == ["measurement"] * 4
    assert lines[-1]["points"] == 4 and lines[-1]["skipped"] == 0
    loaded = load_measurements([out])
    assert {m.sweep for m in loaded} == {"arb"}
    assert sorted({m.behind for m in loaded}) == ARB_BEHIND
    assert all(m.gap_us >= 2.0 for m in loaded)
    assert {m.metric for m in loaded} >= {"lat_min", "lat_median", "lat_max"}


def test_end_to_end_arb_sweep_stops_at_the_time_limit(fake_probe: Path, tmp_path: Path):
    """An --iters no point reaches: each arb point stops at --time-limit with the samples
    it has (`truncated`), and the run goes on to the next point."""
    out = tmp_path / "arb-limit.jsonl"
    run, _ = _run_arb(fake_probe, out, "--iters", "100000000", "--time-limit", "0.1")
    ms = run.measurements
    assert [m["behind"] for m in ms] == ARB_BEHIND, [s["reason"] for s in run.skips]
    for m in ms:
        assert m["truncated"] and 0 < m["iters"] < 100_000_000, m
        assert m["elapsed_s"] < 1.0 and m["lat_us"]["min"] <= m["lat_us"]["max"], m


def test_end_to_end_qps_sweep_with_posting_threads(fake_probe: Path, tmp_path: Path):
    """--qps-threads 4: at every QP count from 4 on, the qps sweep adds a throughput point
    from 4 posting threads (each owning a quarter of the QPs, its own CQ) next to the
    one-thread one; the file parses and every such point maps to the simulated experiment
    with the same threads, QPs, depth and payload. On the fake verbs every completion must
    come back on the CQ of the thread that posted it: a CQ split that differs from the
    threads' QP split loses completions (skips, or points cut short by the time limit)."""
    from calibration import fit as F
    from calibration.parsers import load_measurements, parse_probe_jsonl
    from rnicsim.profile import load_profile

    out = tmp_path / "probe.jsonl"
    r = _client_run(fake_probe, out, "--sweeps", "qps", "--qps-threads", "4", "--max-qps",
                    "32", "--iters", "20", "--bw-iters", "400", "--time-limit", "3",
                    "--connect-timeout", "5")
    assert r.returncode == 0, r.stderr
    run = parse_probe_jsonl(out.read_text(encoding="utf-8"), str(out))
    assert run.complete and not run.skips, [s["reason"] for s in run.skips]
    assert run.header["args"]["qps_threads"] == 4
    bw = [m for m in run.measurements if m["method"] == "throughput"]
    assert [(m["qps"], m["threads"], m["depth"]) for m in bw] == [
        (1, 1, 16), (2, 1, 16), (4, 1, 16), (4, 4, 16), (8, 1, 16), (8, 4, 16),
        (16, 1, 16), (16, 4, 16), (32, 1, 8), (32, 4, 8)]
    for m in bw:
        # every operation of every thread completed (ops: max(bw-iters, 16 x QPs) in all)
        assert not m["truncated"] and m["mops"] > 0, m
        assert m["iters"] >= max(400, 16 * m["qps"]), m
    assert sorted(m["qps"] for m in run.measurements if m["method"] == "post_to_cqe") == \
        [1, 2, 4, 8, 16, 32]
    ms = load_measurements([out])
    points, unmapped = F.map_measurements(ms, load_profile("cx3-qdr"))
    assert not unmapped
    got = sorted((p.exp.tool, p.exp.qps, p.exp.threads, p.exp.tx_depth, p.exp.size)
                 for p in points if p.exp.threads > 1)
    assert got == [("ib_read_bw", q, 4, 16 if q <= 16 else 8, 32) for q in (4, 8, 16, 32)]


def test_end_to_end_batch_sweep_with_posting_threads(fake_probe: Path, tmp_path: Path):
    """--qps-threads 4: at every batch size the batch sweep measures READ and WRITE from
    one thread on one QP and from 4 threads on a QP each (the same operations in all),
    every operation completes, and each threaded point maps to the simulated ib_*_bw run
    with 4 threads, 4 QPs and the batch as its post list (its own series per thread
    count)."""
    from calibration import fit as F
    from calibration.parsers import load_measurements, parse_probe_jsonl
    from rnicsim.profile import load_profile

    out = tmp_path / "probe.jsonl"
    r = _client_run(fake_probe, out, "--sweeps", "batch", "--qps-threads", "4", "--bw-iters",
                    "512", "--time-limit", "3", "--connect-timeout", "5")
    assert r.returncode == 0, r.stderr
    run = parse_probe_jsonl(out.read_text(encoding="utf-8"), str(out))
    assert run.complete and not run.skips, [s["reason"] for s in run.skips]
    ms = run.measurements
    sizes = [1, 2, 4, 8, 16, 32, 64]
    assert [(m["verb"], m["batch"], m["threads"], m["qps"]) for m in ms] == [
        (v, b, t, t) for v in ("READ", "WRITE") for b in sizes for t in (1, 4)]
    for m in ms:
        assert not m["truncated"] and m["mops"] > 0, m
        assert (m["depth"], m["signal_every"], m["payload"]) == (128, 64, 32), m
        assert m["iters"] >= 512, m
    points, unmapped = F.map_measurements(load_measurements([out]), load_profile("cx4-edr"))
    assert not unmapped
    got = sorted((p.exp.tool, p.exp.threads, p.exp.qps, p.exp.post_list)
                 for p in points if p.exp.threads > 1)
    assert got == sorted((t, 4, 4, b) for t in ("ib_read_bw", "ib_write_bw") for b in sizes)
    assert len({p.series for p in points}) == 4      # READ/WRITE x 1/4 threads


def test_end_to_end_time_limit_and_interrupt(fake_probe: Path, tmp_path: Path):
    """Points stop at --time-limit; SIGINT ends the run with an 'interrupted' end line."""
    from calibration.parsers import parse_probe_jsonl

    port = _free_port()
    srv = _start_server(fake_probe, port)
    out = tmp_path / "probe.jsonl"
    cli = subprocess.Popen([str(fake_probe), "--client", "127.0.0.1", "--port", str(port),
                            "--out", str(out), "--sweeps", "signal,batch", "--bw-iters",
                            "1000000000", "--time-limit", "0.2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cli.poll() is None:
            if out.exists() and out.read_text(encoding="utf-8").count('"measurement"') >= 2:
                break
            time.sleep(0.05)
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=60)
    finally:
        _stop(cli)
        _stop(srv)
    assert cli.returncode == 130, err
    run = parse_probe_jsonl(out.read_text(encoding="utf-8"), str(out))
    assert run.end is not None and run.end["status"] == "interrupted"
    assert len(run.measurements) >= 2
    assert all(m["truncated"] for m in run.measurements)
    assert all(m["elapsed_s"] < 2.0 for m in run.measurements)


def test_unreachable_peer_exits_2_quickly(fake_probe: Path, tmp_path: Path):
    out = tmp_path / "never.jsonl"
    t0 = time.monotonic()
    r = _run([str(fake_probe), "--client", "127.0.0.1", "--port", str(_free_port()),
              "--connect-timeout", "1", "--out", str(out)], timeout=60)
    assert time.monotonic() - t0 < 10
    assert r.returncode == 2
    assert r.stderr.startswith("rnicsim-probe: cannot connect to 127.0.0.1:")
    assert r.stderr.count("\n") == 1
    assert not out.exists()


def test_fake_without_device_matches_the_real_message(fake_probe: Path):
    r = subprocess.run([str(fake_probe), "--client", "127.0.0.1"], capture_output=True,
                       text=True, timeout=30, env={**ENV, "FAKEVERBS_NO_DEVICE": "1"})
    assert r.returncode == 2 and r.stderr == "rnicsim-probe: no RDMA device found\n"
