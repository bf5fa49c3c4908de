"""Laws of the RDMC block schedules (protocols/rdmc/schedules.py), claims M1 and M2.

Hypothesis draws n in 2..1024 and k in 1..512, skewed towards small sizes so that the whole
file stays fast while large and extreme sizes are still drawn; the explicit examples pin
the corners. Hand-computed schedules at the end fix the exact block choices.
"""
from __future__ import annotations

import heapq
import random
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocols.rdmc import schedules as S

MAX_N, MAX_K = 1024, 512

_FAST = settings(max_examples=40, deadline=None, database=None)
_MEDIUM = settings(max_examples=20, deadline=None, database=None)


def _skewed(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Mostly small values, sometimes anything up to ``hi``, sometimes a power of two or a bound."""
    powers = [1 << e for e in range(hi.bit_length()) if lo <= 1 << e <= hi]
    return st.one_of(
        st.integers(lo, min(hi, 24)),
        st.integers(lo, min(hi, 24)),
        st.integers(lo, hi),
        st.sampled_from(powers + [lo, hi]),
    )


nodes = _skewed(2, MAX_N)
blocks = _skewed(1, MAX_K)
# Sequential send is (n - 1) * k single-transfer steps; keep its product moderate.
small_nodes = _skewed(2, 128)
small_blocks = _skewed(1, 64)


def _sizes(algorithm: str) -> tuple[st.SearchStrategy[int], st.SearchStrategy[int]]:
    return (small_nodes, small_blocks) if algorithm == "sequential" else (nodes, blocks)


def check_schedule(steps: list, n: int, k: int) -> None:
    """Assert the schedule laws: well-formed transfers; at most one send and one receive per
    node per step; only held blocks are sent (root holds all, a block received in step s
    can go out from s + 1); every non-root node receives every block exactly once."""
    held_since = [dict.fromkeys(range(k), -1)] + [{} for _ in range(n - 1)]
    for j, step in enumerate(steps):
        senders = [t[0] for t in step]
        receivers = [t[1] for t in step]
        assert len(set(senders)) == len(senders), f"step {j}: a node sends twice"
        assert len(set(receivers)) == len(receivers), f"step {j}: a node receives twice"
        for snd, rcv, blk in step:
            assert 0 <= snd < n and 0 < rcv < n and snd != rcv and 0 <= blk < k, (j, snd, rcv, blk)
            got = held_since[snd].get(blk)
            assert got is not None and got < j, f"step {j}: {snd} sends b{blk} before holding it"
            assert blk not in held_since[rcv], f"step {j}: {rcv} receives b{blk} again"
        for _snd, rcv, blk in step:
            held_since[rcv][blk] = j
    for node in range(1, n):
        assert len(held_since[node]) == k, f"node {node} ends with {len(held_since[node])}/{k} blocks"


def _log2_floor(n: int) -> int:
    return n.bit_length() - 1


def _log2_ceil(n: int) -> int:
    return (n - 1).bit_length()


# ---------------------------------------------------------------------------------------
# Laws for every algorithm
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", S.ALGORITHMS)
@given(data=st.data())
@_FAST
def test_every_block_reaches_every_node_once_from_a_holder(algorithm: str, data) -> None:
    """Every receiver gets every block exactly once, from a node that already held it, with at
    most one send and one receive per node per step."""
    n_strategy, k_strategy = _sizes(algorithm)
    n, k = data.draw(n_strategy, "n"), data.draw(k_strategy, "k")
    opts = {"rack_size": data.draw(st.integers(1, 40), "rack_size")} if algorithm == "hybrid" else {}
    check_schedule(S.schedule(algorithm, n, k, **opts), n, k)


@pytest.mark.parametrize(
    ("algorithm", "n", "k"),
    [
        ("binomial-pipeline", MAX_N, MAX_K),
        ("binomial-pipeline", MAX_N - 1, MAX_K),
        ("binomial-pipeline", 2, 1),
        ("binomial-pipeline", 3, 1),
        ("hybrid", MAX_N, MAX_K),
        ("chain", MAX_N, MAX_K),
        ("binomial-tree", MAX_N - 1, 64),
        ("sequential", 64, 64),
    ],
)
def test_corner_sizes(algorithm: str, n: int, k: int) -> None:
    """The largest sizes obey the same laws."""
    check_schedule(S.schedule(algorithm, n, k), n, k)


@pytest.mark.parametrize("algorithm", S.ALGORITHMS)
@given(data=st.data())
@_FAST
def test_step_counts_match_the_closed_forms(algorithm: str, data) -> None:
    """Sequential (n-1)k, chain n+k-2, binomial tree k*ceil(log2 n), binomial pipeline
    k+L-1 for n = 2**L and k+L otherwise, hybrid the two pipelines one after the other."""
    n_strategy, k_strategy = _sizes(algorithm)
    n, k = data.draw(n_strategy, "n"), data.draw(k_strategy, "k")
    L = _log2_floor(n)
    bp = k + L - 1 if n == 1 << L else k + L
    if algorithm == "hybrid":
        r = data.draw(st.integers(1, 40), "rack_size")
        racks = -(-n // r)
        expected = S.step_count("binomial-pipeline", racks, k) + S.step_count(
            "binomial-pipeline", min(r, n), k
        )
        opts = {"rack_size": r}
    else:
        expected = {
            "sequential": (n - 1) * k,
            "chain": n + k - 2,
            "binomial-tree": k * _log2_ceil(n),
            "binomial-pipeline": bp,
        }[algorithm]
        opts = {}
    assert S.step_count(algorithm, n, k, **opts) == expected
    assert len(S.schedule(algorithm, n, k, **opts)) == expected


@given(L=st.integers(1, 10), k=blocks)
@_MEDIUM
def test_m1_binomial_pipeline_power_of_two(L: int, k: int) -> None:
    """M1: for n = 2**L the binomial pipeline takes L + k - 1 steps and keeps every node to one
    send and one receive per step."""
    n = 1 << L
    steps = S.schedule("binomial-pipeline", n, k)
    assert len(steps) == L + k - 1
    check_schedule(steps, n, k)


@given(L=st.integers(1, 8), k=st.integers(1, 40))
@_MEDIUM
def test_closed_form_equals_the_ganesan_seshadri_rule(L: int, k: int) -> None:
    """Paper 4.4: in step j every node whose neighbour along j % L is not the root sends as
    soon as it holds a block, and a non-root node sends the highest block it holds."""
    n = 1 << L
    holds = [set(range(k))] + [set() for _ in range(n - 1)]
    for j, step in enumerate(S.schedule("binomial-pipeline", n, k)):
        sent = {snd: (rcv, blk) for snd, rcv, blk in step}
        for i in range(n):
            t = i ^ (1 << (j % L))
            if t == 0 or not holds[i]:
                assert i not in sent
                continue
            wanted = min(j, k - 1) if i == 0 else max(holds[i])
            assert sent[i] == (t, wanted)
        for _snd, rcv, blk in step:
            holds[rcv].add(blk)


@given(L=st.integers(2, 10), k=blocks)
@example(L=10, k=MAX_K)
@example(L=2, k=2)
@_MEDIUM
def test_m2_average_steady_slack(L: int, k: int) -> None:
    """M2: in every steady step L..L+k-2 the mean slack of the n - 2 non-root senders is
    2(1 - (L-1)/(n-2))."""
    n = 1 << L
    steps = S.schedule("binomial-pipeline", n, k)
    profile = S.slack_profile(steps)
    expected = 2 * (1 - Fraction(L - 1, n - 2))
    assert S.predicted_average_slack(n) == pytest.approx(float(expected), rel=1e-12)
    steady = S.steady_steps(n, k)
    assert list(steady) == list(range(L, L + k - 1))
    for j in steady:
        non_root = [t for t in steps[j] if t[0] != 0]
        assert len(non_root) == n - 2
        assert profile[j] == pytest.approx(float(expected), rel=1e-12)
    if len(steady):
        assert S.slack(steps, steady[-1]) == profile[steady[-1]]


@given(n=nodes, k=blocks)
@example(n=3, k=1)
@example(n=MAX_N - 1, k=MAX_K)
@_MEDIUM
def test_binomial_pipeline_twins_follow_the_hypercube(n: int, k: int) -> None:
    """Other n take k + L steps. Folding each twin (rank r >= N = 2**L) onto its vertex
    r + 1 - N, the transfers between vertices are exactly the N-node pipeline, and the extra
    final step only completes twins (inside a vertex, or across dimension 0 when k = 1)."""
    L = _log2_floor(n)
    N = 1 << L
    if n == N:
        return
    steps = S.schedule("binomial-pipeline", n, k)
    assert len(steps) == k + L

    def vertex(r: int) -> int:
        return r if r < N else r + 1 - N

    folded = [
        sorted((vertex(s), vertex(r), b) for s, r, b in step if vertex(s) != vertex(r))
        for step in steps
    ]
    assert folded[:-1] == S.schedule("binomial-pipeline", N, k)
    twins_of = {vertex(r) for r in range(N, n)}
    for s, r, _b in steps[-1]:
        assert vertex(r) in twins_of
        assert vertex(s) == vertex(r) or (k == 1 and vertex(s) == vertex(r) ^ 1)


@pytest.mark.parametrize("algorithm", S.ALGORITHMS)
@given(data=st.data())
@_FAST
def test_node_plans_are_the_two_ends_of_the_schedule(algorithm: str, data) -> None:
    """Each send in a node plan has a matching receive at its peer in the same step, and a node
    receives a block strictly before the step in which it sends it."""
    n = data.draw(st.integers(1, 64), "n")
    k = data.draw(st.integers(1, 16), "k")
    plans = S.node_plans(algorithm, n, k)
    steps = S.schedule(algorithm, n, k)
    assert sum(len(p.sends) for p in plans) == sum(len(s) for s in steps)
    for plan in plans:
        assert [t.step for t in plan.sends] == sorted({t.step for t in plan.sends})
        assert [t.step for t in plan.receives] == sorted({t.step for t in plan.receives})
        for step, peer, block in plan.sends:
            assert (step, plan.node, block) in plans[peer].receives
            assert plan.received_in(block) is not None and plan.received_in(block) < step
        assert plan == S.transfers_for_node(algorithm, n, k, plan.node)
        if plan.node:
            assert sorted(t.block for t in plan.receives) == list(range(k))


@pytest.mark.parametrize("algorithm", S.ALGORITHMS)
@given(n=st.integers(2, 48), k=st.integers(1, 12), seed=st.integers(0, 2**32 - 1))
@_FAST
def test_asynchronous_execution_of_the_plans_completes(algorithm: str, n: int, k: int, seed: int) -> None:
    """Driven asynchronously (random transfer times, no lockstep), nodes that run their sends
    and receives in plan order, each send waiting only for its block and its receiver, never
    deadlock and end with every block."""
    rng = random.Random(seed)
    plans = S.node_plans(algorithm, n, k)
    next_send = [0] * n  # index of the next send / receive in each node's plan
    next_recv = [0] * n
    sending = [False] * n
    receiving = [False] * n
    holds = [set(range(k))] + [set() for _ in range(n - 1)]
    in_flight: list[tuple[float, int, int, int]] = []  # (finish time, sender, receiver, block)
    now = 0.0

    def start_ready() -> None:
        for x in range(n):
            if sending[x] or next_send[x] == len(plans[x].sends):
                continue
            step, y, b = plans[x].sends[next_send[x]]
            posted = not receiving[y] and plans[y].receives[next_recv[y]].step == step
            if b in holds[x] and posted:
                sending[x] = receiving[y] = True
                heapq.heappush(in_flight, (now + rng.uniform(0.5, 2.0), x, y, b))

    start_ready()
    while in_flight:
        now, x, y, b = heapq.heappop(in_flight)
        holds[y].add(b)
        sending[x] = receiving[y] = False
        next_send[x] += 1
        next_recv[y] += 1
        start_ready()
    assert next_send == [len(p.sends) for p in plans]
    assert next_recv == [len(p.receives) for p in plans]
    assert all(h == set(range(k)) for h in holds)


# ---------------------------------------------------------------------------------------
# Argument checking
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "opts", "match"),
    [
        (("binomial", 4, 2), {}, "unknown algorithm 'binomial': expected one of sequential, chain"),
        (("chain", 0, 2), {}, "nodes must be an integer >= 1, got 0"),
        (("chain", -3, 2), {}, "nodes must be an integer >= 1"),
        (("chain", 4, 0), {}, "blocks must be an integer >= 1, got 0"),
        (("chain", 4, 2.0), {}, "blocks must be an integer >= 1"),
        (("chain", True, 2), {}, "nodes must be an integer >= 1"),
        (("chain", 4, 2), {"rack_size": 2}, "'rack_size' applies only to hybrid"),
        (("hybrid", 4, 2), {"rack_size": 0}, "rack_size must be an integer >= 1"),
        (("hybrid", 4, 2), {"racks": 2}, "unknown option 'racks'"),
    ],
)
def test_invalid_arguments_raise_value_error(args: tuple, opts: dict, match: str) -> None:
    """Unknown algorithms or options, n < 1 and k < 1 are ValueErrors naming the culprit."""
    with pytest.raises(ValueError, match=match):
        S.schedule(*args, **opts)
    with pytest.raises(ValueError, match=match):
        S.step_count(*args, **opts)


def test_transfers_for_node_rejects_a_rank_outside_the_group() -> None:
    """Ranks are 0..n-1."""
    with pytest.raises(ValueError, match=r"0\.\.3"):
        S.transfers_for_node("chain", 4, 2, 4)


def test_single_node_group_has_no_steps() -> None:
    """With only the root there is nothing to send."""
    for algorithm in S.ALGORITHMS:
        assert S.schedule(algorithm, 1, 5) == []
        assert S.step_count(algorithm, 1, 5) == 0


def test_slack_helpers_reject_out_of_range_input() -> None:
    """The M2 formula needs n = 2**L >= 4; slack needs a step of the schedule."""
    for n in (2, 3, 6, 1000):
        with pytest.raises(ValueError, match="power of two"):
            S.predicted_average_slack(n)
    with pytest.raises(ValueError, match="step must be"):
        S.slack(S.schedule("chain", 3, 2), 3)
    with pytest.raises(ValueError, match="does not hold"):
        S.slack_profile([[(1, 2, 0)]])


# ---------------------------------------------------------------------------------------
# Hand-computed schedules
# ---------------------------------------------------------------------------------------


def test_binomial_pipeline_four_nodes_two_blocks() -> None:
    """n=4, k=2 by the paper's rule: the root sends block j (then the last block), the others
    the highest block they hold, along dimension j % 2; 3 = L + k - 1 steps."""
    assert S.schedule("binomial-pipeline", 4, 2) == [
        [(0, 1, 0)],
        [(0, 2, 1), (1, 3, 0)],
        [(0, 1, 1), (2, 3, 1), (3, 2, 0)],
    ]


def test_binomial_pipeline_eight_nodes_three_blocks_first_steps() -> None:
    """n=8, k=3 (the paper's figure 3): the root sends b0, b1, b2 along dimensions 0, 1, 2
    while receivers relay; the last step delivers everyone's last block."""
    steps = S.schedule("binomial-pipeline", 8, 3)
    assert len(steps) == 5
    assert steps[0] == [(0, 1, 0)]
    assert steps[1] == [(0, 2, 1), (1, 3, 0)]
    assert steps[2] == [(0, 4, 2), (1, 5, 0), (2, 6, 1), (3, 7, 0)]
    assert [t for t in steps[3] if t[0] == 0] == [(0, 1, 2)]
    assert [t for t in steps[4] if t[0] == 0] == [(0, 2, 2)]


def test_binomial_pipeline_three_nodes_uses_a_twin() -> None:
    """n=3: vertex 1 holds members 1 and 2; the twins take turns receiving from the root and
    swap blocks in the final step (k + L = 3 steps)."""
    assert S.schedule("binomial-pipeline", 3, 2) == [
        [(0, 1, 0)],
        [(0, 2, 1)],
        [(1, 2, 0), (2, 1, 1)],
    ]


def test_chain_three_nodes_two_blocks() -> None:
    """The bucket brigade: n + k - 2 = 3 steps."""
    assert S.schedule("chain", 3, 2) == [[(0, 1, 0)], [(0, 1, 1), (1, 2, 0)], [(1, 2, 1)]]


def test_sequential_three_nodes_two_blocks() -> None:
    """The root sends everything to 1, then everything to 2."""
    assert S.schedule("sequential", 3, 2) == [[(0, 1, 0)], [(0, 1, 1)], [(0, 2, 0)], [(0, 2, 1)]]


def test_binomial_tree_five_nodes_one_block() -> None:
    """Figure 3 (left) truncated to 5 nodes: 0->1; 0->2, 1->3; 0->4."""
    assert S.schedule("binomial-tree", 5, 1) == [[(0, 1, 0)], [(0, 2, 0), (1, 3, 0)], [(0, 4, 0)]]


def test_hybrid_two_racks_of_four() -> None:
    """Leaders 0 and 4 first, then the four-node pipeline inside both racks at once."""
    assert S.schedule("hybrid", 8, 2, rack_size=4) == [
        [(0, 4, 0)],
        [(0, 4, 1)],
        [(0, 1, 0), (4, 5, 0)],
        [(0, 2, 1), (1, 3, 0), (4, 6, 1), (5, 7, 0)],
        [(0, 1, 1), (2, 3, 1), (3, 2, 0), (4, 5, 1), (6, 7, 1), (7, 6, 0)],
    ]
    assert S.schedule("hybrid", 3, 2) == S.schedule("binomial-pipeline", 3, 2)


def test_node_plan_of_a_relay() -> None:
    """Node 3 of the n=4, k=2 pipeline: gets b0 from 1 in step 1, relays it to 2 in step 2
    while getting b1 from 2."""
    plan = S.transfers_for_node("binomial-pipeline", 4, 2, 3)
    assert plan.sends == ((2, 2, 0),)
    assert plan.receives == ((1, 1, 0), (2, 2, 1))
    assert plan.received_in(0) == 1
    assert S.transfers_for_node("binomial-pipeline", 4, 2, 0).received_in(1) == -1
