"""Switch: cut-through, output-queued, lossless.

Scope: a switch is a set of output ports, each a :class:`~rnicsim.hw.link.LinkDir` whose
``sw_lat`` is this switch's port-to-port latency and whose ``buffer`` is its output
buffer; forwarding and backpressure happen in :func:`rnicsim.hw.link.transmit`.

Params (profile ``switch``): latency [ns], buffer_per_port [B].
"""
from __future__ import annotations

from .link import LinkDir


class Switch:
    """A switch named ``name`` with output ports created by :meth:`port`."""

    def __init__(self, name: str, latency: float, buffer: int, env=None,
                 mtu_bytes: int = 4096 + 64) -> None:
        self.name = name
        self.env = env
        self.mtu_bytes = mtu_bytes
        self.latency = latency
        self.buffer = buffer
        self.ports: dict[str, LinkDir] = {}

    def port(self, to: str, rate: float, prop: float) -> LinkDir:
        """The output port towards ``to`` (created on first use)."""
        p = self.ports.get(to)
        if p is None:
            p = self.ports[to] = LinkDir(f"{self.name}->{to}", rate, prop, self.latency,
                                         self.buffer, self.env, self.mtu_bytes)
        return p
