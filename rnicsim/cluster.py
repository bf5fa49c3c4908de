"""Cluster: nodes (host cores, memory, RNICs) wired by a fabric.

``Cluster(sim, profile, nodes, nics_per_node, cores, topology)`` builds everything; objects
that cost memory (QP contexts, memory contents) are created lazily when software uses them.
Software reaches the hardware only through :mod:`rnicsim.verbs`.
"""
from __future__ import annotations

from collections import OrderedDict
from numbers import Integral
from typing import Callable

from .fabric import Fabric
from .hw.host import Core, CpuThread
from .hw.rnic import Rnic


class Node:
    """One machine: ``cores``, ``nics`` and the memory regions registered on it."""

    def __init__(self, sim, node_id: int, profile, nics_per_node: int, cores: int,
                 first_nic_id: int) -> None:
        self.sim = sim
        self.id = node_id
        self.profile = profile
        self.memory: dict = {}
        self.cores = [Core(f"n{node_id}/core{c}") for c in range(max(1, cores))]
        self.nics = [Rnic(sim, first_nic_id + i, node_id, profile, self.memory,
                          f"n{node_id}/nic{i}") for i in range(nics_per_node)]
        self._threads: dict[int, CpuThread] = {}
        # Per core, the QPs whose posting state its cache holds, least recently posted
        # first (rnicsim.verbs, host.qp_state_cache).
        self.qp_state: dict[Core, OrderedDict] = {}

    def thread(self, index: int) -> CpuThread:
        """Software thread ``index`` of this node, pinned to core ``index mod cores``."""
        t = self._threads.get(index)
        if t is None:
            core = self.cores[index % len(self.cores)]
            t = self._threads[index] = CpuThread(self.sim, f"n{self.id}/t{index}", core,
                                                 self.profile.host, self.id)
        return t


class Cluster:
    """Nodes and fabric of one simulated cluster.

    Params: ``sim`` the :class:`~rnicsim.sim.Simulation`; ``profile`` a loaded
    :class:`~rnicsim.profile.Profile`; ``nodes`` [count, >= 1]; ``nics_per_node``
    [count, >= 1]; ``cores`` per node [count, >= 1] (default: the profile's ``host.cores``);
    ``topology`` a scenario topology dict (default ``{"kind": "single_switch"}``).
    ``cluster.nodes[i]`` is node i (``.thread(j)`` its software thread j), ``cluster.nics``
    every RNIC in node order, ``cluster.fabric`` the links and switches. Raises
    ValueError for fewer than one node, NIC or core per node; TypeError for a profile that
    is not a :class:`~rnicsim.profile.Profile` (e.g. a profile name) or a count that is not
    a whole number.
    """

    def __init__(self, sim, profile, nodes: int, nics_per_node: int = 1,
                 cores: int | None = None, topology: dict | None = None) -> None:
        from .profile import Profile
        if not isinstance(profile, Profile):
            raise TypeError(f"Cluster: profile must be a Profile (rnicsim.profile.load_profile"
                            f"(name)), got {type(profile).__name__} {profile!r}")
        for name, v in (("nodes", nodes), ("nics_per_node", nics_per_node)):
            if isinstance(v, bool) or not isinstance(v, Integral):
                raise TypeError(f"Cluster: {name} must be a whole number, got {v!r}")
        if cores is not None and (isinstance(cores, bool) or not isinstance(cores, Integral)
                                  or cores < 1):
            raise ValueError(f"Cluster: cores must be a whole number >= 1, got {cores!r}")
        if nodes < 1 or nics_per_node < 1:
            raise ValueError("a cluster needs at least one node with one NIC")
        self.sim = sim
        self.profile = profile
        cores = profile.host.cores if cores is None else cores
        self.nodes = [Node(sim, n, profile, nics_per_node, cores, n * nics_per_node)
                      for n in range(nodes)]
        self.nics = [nic for node in self.nodes for nic in node.nics]
        self.fabric = Fabric(profile, nodes, nics_per_node,
                             topology or {"kind": "single_switch"}, sim.env, sim.rng)
        self.fabric.nics = self.nics
        for nic in self.nics:
            nic.fabric = self.fabric
            sim.trace.attach(nic.pcie, f"{nic.name}/pcie")
        for l in self.fabric.links():
            sim.trace.attach(l, l.name)
        self._next_key = 0

    def new_key(self) -> int:
        """A cluster-unique memory key (1, 2, ...; :meth:`Context.reg_mr` draws its rkeys here)."""
        self._next_key += 1
        return self._next_key

    def setup_done(self) -> None:
        """Forget the CPU time spent setting up (QPs, receive buffers): set-up happens
        before the measured program starts, as on a real cluster."""
        for node in self.nodes:
            for c in node.cores:
                c.busy_until = 0.0
                c.busy_ns = 0.0

    def qpc_counts(self) -> tuple[int, int]:
        """``(lookups, misses)`` of the QP-context caches of every NIC since the start (a
        lookup per WQE or message a NIC processes for a QP)."""
        hits = misses = 0
        for nic in self.nics:
            hits += nic.qpc.hits
            misses += nic.qpc.misses
        return hits + misses, misses

    def utilization_meter(self) -> Callable[[], dict[str, float]]:
        """A function giving how busy the cluster's NIC-side resources were over the
        measured window (:meth:`Simulation.measure` first; shares [0-1] as
        :meth:`Simulation.busy_meter` defines them, capped at 1):

        - ``nic_pu_util``: the NICs' processing units, mean over NICs of the share of
          their PUs' time taken by work (requester, responder and completer service,
          context-miss stalls, atomics holding the NIC);
        - ``nic_pu_util_max``: the same for the busiest NIC;
        - ``pcie_util_max``: the busiest PCIe direction of any NIC (TLP time booked);
        - ``wire_util_max``: the busiest link direction attached to a NIC (its egress, or
          the switch port towards it).

        A resource near 1 while the others are well below it is the bottleneck of the
        run; CPU is the workloads' ``cpu_util``."""
        nics = self.nics
        pus = [max(1, n.p.processing_units) for n in nics]
        fab = self.fabric
        pipes = [c for n in nics for c in (n.pcie.up, n.pcie.down)]
        wires = [fab.egress[n.id].cal for n in nics] + \
            [fab.switches[fab.nic_switch[n.id]].ports[f"nic{n.id}"].cal for n in nics]
        meter = self.sim.busy_meter(
            [lambda n=n: n.pu_work_ns for n in nics] +
            [lambda c=c: c.busy_ns for c in pipes + wires])
        k, m = len(nics), len(pipes)

        def util() -> dict[str, float]:
            s = meter()
            pu = [min(1.0, x / u) for x, u in zip(s[:k], pus)]
            return {"nic_pu_util": sum(pu) / k, "nic_pu_util_max": max(pu),
                    "pcie_util_max": min(1.0, max(s[k:k + m])),
                    "wire_util_max": min(1.0, max(s[k + m:]))}

        return util

    def fail_node(self, node: int) -> None:
        """Node ``node`` crashes: its NICs stop; RC peers break after their retry timeout.

        ValueError when ``node`` is not a node index of this cluster."""
        if isinstance(node, bool) or not isinstance(node, Integral) or \
                not 0 <= node < len(self.nodes):
            raise ValueError(f"fail_node: node must be a node index 0..{len(self.nodes) - 1}, "
                             f"got {node!r}")
        for nic in self.nodes[node].nics:
            nic.fail()
