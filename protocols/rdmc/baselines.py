"""MPI-style broadcast on the same verbs, the baseline of claim M4 (paper figure 4).

Scope
    ``MPI_Bcast`` as MPICH/MVAPICH2 choose it for one communicator of ``n`` ranks:

    * ``size <= small_limit`` (12 KiB, the MVAPICH2 binomial threshold): **binomial tree**,
      the whole message per transfer, sent eagerly (no rendezvous);
    * larger: **scatter + ring allgather** (van de Geijn): the message is cut in ``n``
      chunks of ``ceil(size / n)`` bytes; a binomial scatter gives rank ``r`` chunk ``r``
      (and forwards its subtree's chunks), then ``n - 1`` ring steps in which every rank
      passes one chunk to its right neighbour, as MPICH's ``scatter_ring_allgather`` does
      (chunks a rank got in the scatter travel the ring again).

    Every rank knows the size and the root (MPI semantics), so there is no first-block
    allocation or copy. Transfers above the eager limit use the rendezvous protocol of
    RDMA MPI libraries: the receiver's "clear to send" (the same zero-length write with
    immediate RDMC uses for ready_for_block), then one RDMA write with immediate of the
    whole chunk range. The plan is executed by the RDMC engine's machinery
    (:class:`protocols.rdmc.engine.Group`): sends in program order, one at a time,
    receives in program order, each node waiting only for what it needs.

    Not modelled: the recursive-doubling allgather MVAPICH2 uses for medium sizes on
    power-of-two communicators, intra-node shared memory, MPI's eager bounce-buffer copy.
"""
from __future__ import annotations

from numbers import Integral
from typing import Sequence

from .engine import Group, Plan, Rdmc

__all__ = ["SMALL_LIMIT", "mpi_plan", "mpi_bcast_group", "mpi_bcast"]

SMALL_LIMIT = 12 * 1024
"""Messages up to this size [B] go by binomial tree (MVAPICH2 ``MV2_BCAST_SHORT_MSG``)."""


def _binomial_children(r: int, n: int) -> tuple[int, list[int]]:
    """(parent, children in send order) of relative rank ``r`` in MPICH's binomial tree."""
    if r == 0:
        parent = -1
        mask = 1
        while mask < n:
            mask <<= 1
    else:
        mask = r & -r
        parent = r - mask
    kids = []
    mask >>= 1
    while mask > 0:
        if r + mask < n:
            kids.append(r + mask)
        mask >>= 1
    return parent, kids


def mpi_plan(n: int, size: int, small_limit: int = SMALL_LIMIT) -> tuple[Plan, int]:
    """The broadcast's :class:`Plan` and its chunk size [B] for ``n`` ranks and ``size`` B."""
    for name, value, lo in (("n", n, 2), ("size", size, 1), ("small_limit", small_limit, 0)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")
    sends: list[list] = [[] for _ in range(n)]
    recvs: list[list] = [[] for _ in range(n)]
    step = 0

    def add(src: int, dst: int, lo: int, hi: int, st: int) -> None:
        recvs[dst].append((src, lo, hi, st))
        sends[src].append((dst, lo, hi, len(recvs[dst]) - 1, st))

    if size <= small_limit:
        bs, k = size, 1
        # Whole message down a binomial tree, largest subtree first (MPICH's order).
        for r in range(n):
            for c in _binomial_children(r, n)[1]:
                add(r, c, 0, 1, (c - 1).bit_length())
        return Plan(n, k, sends, recvs), bs
    bs = -(-size // n)
    k = -(-size // bs)
    # Binomial scatter: rank r ends with chunks [r, r + lowbit(r)) (its subtree).
    for r in range(n):
        _parent, kids = _binomial_children(r, n)
        for c in kids:
            span = c & -c
            lo, hi = c, min(c + span, n, k)
            if lo < hi:
                add(r, c, lo, hi, step + (c.bit_length() - 1))
    # Ring allgather after the scatter (each rank's lists stay in program order).
    step = n.bit_length() + 1
    for s in range(n - 1):
        for r in range(n):
            chunk = (r - s) % n
            if chunk < k:
                add(r, (r + 1) % n, chunk, chunk + 1, step + s)
    return Plan(n, k, sends, recvs), bs


def mpi_bcast_group(engine: Rdmc, members: Sequence[int], size: int,
                    small_limit: int = SMALL_LIMIT) -> Group:
    """A communicator over ``members`` (root first) set up for broadcasts of ``size`` B
    (its plan is for that size: ``send`` of another size raises ValueError)."""
    members = list(members)
    n = len(members)
    plan, bs = mpi_plan(n, size, small_limit)
    pairs = {(min(r, t[0]), max(r, t[0])) for r in range(n) for t in plan.sends[r]}
    parent = [-1] + [plan.recvs[r][0][0] for r in range(1, n)]
    g = Group(engine, len(engine.groups), members, bs, "mpi-bcast", None,
              max(size, bs), None, None, None, plan_fn=lambda k: plan, announce=False,
              eager_limit=small_limit, pairs=pairs, parent=parent, fixed_size=size)
    engine.groups.append(g)
    return g


def mpi_bcast(engine: Rdmc, members: Sequence[int], size: int, **kw):
    """Create the communicator and start one broadcast now; returns the Message."""
    g = mpi_bcast_group(engine, members, size, **kw)
    return g.send(size)
