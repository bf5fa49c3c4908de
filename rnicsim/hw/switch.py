"""Switch: cut-through, output-queued, lossless.

Scope: a switch is a set of output ports, each a :class:`~rnicsim.hw.link.LinkDir` whose
``sw_lat`` is this switch's port-to-port latency and whose ``buffer`` is its output
buffer; forwarding and backpressure happen in :func:`rnicsim.hw.link.transmit`. On RoCE
the switch runs PFC on its ingress ports (``pfc``, a :class:`~rnicsim.hw.pfc.PfcConfig`)
and may mark ECN on its output ports (``ecn``, a :class:`~rnicsim.hw.pfc.EcnConfig`);
both are None on InfiniBand (credit backpressure through ``buffer``).

Params (profile ``switch``): latency [ns], buffer_per_port [B]; RoCE: pfc_xoff, pfc_xon,
pfc_headroom [B], ecn_kmin, ecn_kmax [B], ecn_pmax.
"""
from __future__ import annotations

from .link import LinkDir


class Switch:
    """A switch named ``name`` with output ports created by :meth:`port`."""

    def __init__(self, name: str, latency: float, buffer: int, env=None,
                 mtu_bytes: int = 4096 + 64, pfc=None, ecn=None) -> None:
        self.name = name
        self.env = env
        self.mtu_bytes = mtu_bytes
        self.latency = latency
        self.buffer = buffer
        self.pfc = pfc
        self.ecn = ecn
        self.ports: dict[str, LinkDir] = {}

    def port(self, to: str, rate: float, prop: float) -> LinkDir:
        """The output port towards ``to`` (created on first use)."""
        p = self.ports.get(to)
        if p is None:
            p = self.ports[to] = LinkDir(f"{self.name}->{to}", rate, prop, self.latency,
                                         self.buffer, self.env, self.mtu_bytes)
            p.pfc = self.pfc
            p.ecn = self.ecn
        return p
