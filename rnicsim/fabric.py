"""Fabric: topology (a networkx graph) -> links, switches and routes between NICs.

Topologies:
- ``single_switch``: every NIC port on one switch.
- ``leaf_spine``: NICs spread over ``leaves`` leaf switches (by node, in order), every leaf
  connected to every one of ``spines`` spine switches; the uplink rate is chosen so that a
  leaf's downlink capacity is ``oversubscription`` times its uplink capacity. Routes between
  leaves cross spine ``destination NIC mod spines`` (D-mod-K, as InfiniBand subnet
  managers route fat trees).

Routes are computed lazily with networkx and cached; a route is the list of link
directions a message crosses, starting with the sender's egress.

Loopback: a message from a NIC to a QP of the same NIC (RC QPs connected on one NIC, a UD
send to one of its own QPs) never reaches the port's cable or a switch; the NIC turns it
around inside (InfiniBand: a destination LID equal to the port's own). Its route is the
NIC's loopback direction alone (``nic<i>->loopback``): no propagation, no switch, the
port's data rate (no public measurement of the internal path's rate was found; with
the small messages that go this way, PCIe and the NIC's processing units bound it
first). The NIC processes it as any other message: WQE fetch, send scheduler,
responder, DMA and completion.

Flow control follows ``link.kind``: InfiniBand switches hold the upstream when more than
``buffer_per_port`` waits (credits); RoCE switches run PFC (``switch.pfc_*``) and, when the
NICs run DCQCN (``nic.dcqcn``: their packets are ECN-capable), mark ECN (``switch.ecn_*``)
with the random stream ``ecn``. :meth:`Fabric.pfc_stats` sums the counters.
"""
from __future__ import annotations

from typing import Sequence

import networkx as nx

from .hw.link import LinkDir
from .hw.pfc import EcnConfig, PfcConfig
from .hw.switch import Switch


# Fabric-wide congestion counters a measured window reports (see Fabric.pfc_stats).
PFC_COUNTERS = ("pause_frames", "pause_time_us", "headroom_overflow", "ecn_marks", "cnps")


def leaf_spine_misfit(nodes: int, nics_per_node: int, leaves: int,
                      spines: int) -> tuple[str, str] | None:
    """``(field, what was expected)`` when a leaf_spine of ``leaves`` and ``spines``
    cannot hold ``nodes`` nodes of ``nics_per_node`` NICs as :class:`Fabric` places them,
    else None.

    Nodes go ``ceil(nodes / leaves)`` to a leaf in node order, so every leaf has a node only
    when ``ceil(nodes / ceil(nodes / leaves)) == leaves`` (80 nodes fill 80 leaves, not 100;
    10 nodes fill 5 leaves of 6, not 6). Spine ``s`` carries the traffic to NICs ``s, s +
    spines, ...`` (D-mod-K): a spine beyond the NIC count would carry none while the uplink
    rate is still split over every spine."""
    per_leaf = -(-nodes // leaves)
    filled = -(-nodes // per_leaf)
    if filled < leaves:
        return ("leaves", f"a leaf count whose leaves all get a node: {nodes} nodes go "
                          f"{per_leaf} to a leaf in order and fill only {filled} leaves "
                          f"(leaves: {filled} fits), got {leaves}")
    nics = nodes * nics_per_node
    if spines > nics:
        return ("spines", f"at most the NIC count ({nics}: spine s carries the traffic to "
                          f"NICs s, s + spines, ...), got {spines}")
    return None


class Fabric:
    """Links, switches and routes of one cluster.

    ValueError ``topology.FIELD: ...`` for a leaf_spine that does not fit its nodes
    (:func:`leaf_spine_misfit`) and for an unknown topology kind."""

    def __init__(self, profile, n_nodes: int, nics_per_node: int, topology: dict,
                 env=None, rng_source=None) -> None:
        link, sw = profile.link, profile.switch
        self.env = env
        self.roce = link.kind == "roce"
        self.pfc = PfcConfig(sw.pfc_xoff, sw.pfc_xon, sw.pfc_headroom) if self.roce else None
        self.ecn = None
        if self.roce and profile.nic.dcqcn:
            if rng_source is None:
                raise ValueError("DCQCN needs a random stream for ECN marking (rng_source)")
            self.ecn = EcnConfig(sw.ecn_kmin, sw.ecn_kmax, sw.ecn_pmax, rng_source("ecn"))
        self.mtu_bytes = link.mtu + link.packet_overhead
        self.tx_arbitration = profile.nic.tx_arbitration
        self.rate = link.rate
        self.prop = link.propagation
        kind = topology.get("kind", "single_switch")
        self.kind = kind
        self.graph = nx.Graph()
        self.switches: dict[str, Switch] = {}
        self.egress: dict[int, LinkDir] = {}
        self.loopback: dict[int, LinkDir] = {}    # NIC -> its internal turn-around
        self.nic_switch: dict[int, str] = {}
        self.nics: list = []
        self._routes: dict[tuple[int, int], list[LinkDir]] = {}
        self.down: set[int] = set()          # ids of failed LinkDirs
        n_nics = n_nodes * nics_per_node
        if kind == "single_switch":
            self._add_switch("sw0", sw)
            for nic in range(n_nics):
                self._attach(nic, "sw0")
        elif kind == "leaf_spine":
            leaves = int(topology["leaves"])
            spines = int(topology["spines"])
            self.spines = spines
            over = float(topology.get("oversubscription", 1.0))
            bad = leaf_spine_misfit(n_nodes, nics_per_node, leaves, spines)
            if bad:
                raise ValueError(f"topology.{bad[0]}: {bad[1]}")
            per_leaf_nodes = -(-n_nodes // leaves)
            for s in range(spines):
                self._add_switch(f"spine{s}", sw)
            for lf in range(leaves):
                self._add_switch(f"leaf{lf}", sw)
            for nic in range(n_nics):
                self._attach(nic, f"leaf{(nic // nics_per_node) // per_leaf_nodes}")
            down_cap = per_leaf_nodes * nics_per_node * self.rate
            self.uplink_rate = down_cap / (spines * over)
            for lf in range(leaves):
                for s in range(spines):
                    a, b = f"leaf{lf}", f"spine{s}"
                    self.switches[a].port(b, self.uplink_rate, self.prop)
                    self.switches[b].port(a, self.uplink_rate, self.prop)
                    self.graph.add_edge(a, b)
        else:
            raise ValueError(f"unknown topology kind {kind!r}")

    def _add_switch(self, name: str, sw) -> None:
        self.switches[name] = Switch(name, sw.latency, sw.buffer_per_port, self.env,
                                     self.mtu_bytes, self.pfc, self.ecn)
        self.graph.add_node(name, kind="switch")

    def _attach(self, nic: int, swname: str) -> None:
        self.egress[nic] = LinkDir(f"nic{nic}->{swname}", self.rate, self.prop,
                                   env=self.env, mtu_bytes=self.mtu_bytes)
        # nic.tx_arbitration packet: the egress interleaves packets (per-QP round robin,
        # hw/calendar.py); message and fifo serve a message whole (the NIC's send
        # scheduler picks the next one, hw/arbiter.py PerMessageRoundRobin._on_pull).
        self.egress[nic].interleave = self.tx_arbitration == "packet"
        self.loopback[nic] = LinkDir(f"nic{nic}->loopback", self.rate, 0.0, env=self.env,
                                     mtu_bytes=self.mtu_bytes)
        self.switches[swname].port(f"nic{nic}", self.rate, self.prop)
        self.nic_switch[nic] = swname
        self.graph.add_edge(f"nic{nic}", swname)

    def route(self, src: int, dst: int) -> list[LinkDir]:
        """Link directions from NIC ``src`` to NIC ``dst`` (cached); ``src == dst``: the
        NIC's loopback direction alone (module doc)."""
        key = (src, dst)
        r = self._routes.get(key)
        if r is not None:
            return r
        if src == dst:
            r = self._routes[key] = [self.loopback[src]]
            return r
        a, b = self.nic_switch[src], self.nic_switch[dst]
        if a == b:
            hops = [a]
        elif self.kind == "leaf_spine":
            # Destination-mod-k, as InfiniBand subnet managers route fat trees: traffic to
            # one NIC always crosses the same spine, and destinations spread evenly.
            hops = [a, f"spine{dst % self.spines}", b]
        else:
            paths = sorted(nx.all_shortest_paths(self.graph, a, b))
            hops = paths[dst % len(paths)]
        r = [self.egress[src]]
        for i, s in enumerate(hops):
            nxt = hops[i + 1] if i + 1 < len(hops) else f"nic{dst}"
            r.append(self.switches[s].ports[nxt])
        self._routes[key] = r
        return r

    def path_up(self, path: Sequence[LinkDir]) -> bool:
        """False when a link on ``path`` has failed."""
        if not self.down:
            return True
        return all(id(l) not in self.down for l in path)

    def fail_link(self, nic: int) -> None:
        """Cut the cable of NIC ``nic`` (both directions)."""
        self.down.add(id(self.egress[nic]))
        self.down.add(id(self.switches[self.nic_switch[nic]].ports[f"nic{nic}"]))

    def set_link_rate(self, nic: int, rate_bps: float) -> None:
        """Run NIC ``nic``'s cable (both directions) at ``rate_bps`` [bit/s]: a slow link."""
        from .hw.link import set_rate

        set_rate(self.egress[nic], rate_bps)
        set_rate(self.switches[self.nic_switch[nic]].ports[f"nic{nic}"], rate_bps)

    def links(self) -> list[LinkDir]:
        """Every link direction of the fabric (the NICs' loopback directions included)."""
        out = list(self.egress.values()) + list(self.loopback.values())
        for s in self.switches.values():
            out.extend(s.ports.values())
        return out

    def pfc_stats(self, until: float | None = None) -> dict:
        """PFC/ECN/CNP counters of the whole fabric (cumulative since the start).

        Pauses are booked ahead of time; ``pause_time_us`` counts paused time before
        ``until`` (default: the current simulated time; ``inf``: everything booked).

        ``pause_frames`` (PAUSE frames switches sent = upstream directions received),
        ``pause_time_us`` (time upstream directions were paused, summed over directions and
        priorities), ``headroom_overflow`` (pauses whose in-flight bytes exceeded the
        headroom), ``ecn_marks``, ``cnps`` (CNPs sent by NICs), ``cnps_received``, and
        ``links``: per upstream direction with pauses, ``{name: {pause_frames,
        pause_time_us, max_occupancy}}``.
        """
        if until is None:
            until = self.env.now if self.env is not None else float("inf")
        frames = over = marks = 0
        paused = 0.0
        per = {}
        for l in self.links():
            marks += l.ecn_marks
            if not l.pstate:
                continue
            lf = 0
            lp = 0.0
            occ = 0.0
            for st in l.pstate.values():
                lf += st.pause_frames
                lp += st.paused_until(until)
                over += st.headroom_overflow
                occ = max(occ, st.max_occupancy)
            frames += lf
            paused += lp
            if lf:
                per[l.name] = {"pause_frames": lf, "pause_time_us": lp / 1e3,
                               "max_occupancy": occ}
        cnps = sum(n.counters.get("cnp_sent", 0) for n in self.nics)
        cnpr = sum(n.counters.get("cnp_received", 0) for n in self.nics)
        return {"pause_frames": frames, "pause_time_us": paused / 1e3,
                "headroom_overflow": over, "ecn_marks": marks, "cnps": cnps,
                "cnps_received": cnpr, "links": per}

    def pfc_window(self, sim, start: float):
        """Count the :data:`PFC_COUNTERS` from ``start`` [ns] on (a measured window).

        Returns a function that, called at the end of the window, gives each counter's
        increase since ``start`` (floats; ``pause_time_us`` in microseconds)."""
        snap: dict = {}
        sim.call_at(start, lambda: snap.update(self.pfc_stats()))

        def since() -> dict[str, float]:
            st = self.pfc_stats()
            return {k: float(st[k] - snap.get(k, 0)) for k in PFC_COUNTERS}
        return since
