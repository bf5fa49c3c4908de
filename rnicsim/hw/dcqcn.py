"""DCQCN reaction point: the per-QP rate limiter of a RoCE NIC (Zhu et al., SIGCOMM'15).

Scope
    One :class:`Dcqcn` per QP (created only when the profile's ``nic.dcqcn`` is on). The
    limiter is inactive (line rate, zero cost) until the first CNP; then

    - on a CNP: ``Rt <- Rc``, ``Rc <- Rc (1 - alpha/2)``, ``alpha <- (1-g) alpha + g``,
      and the timer and byte counters restart;
    - every ``timer`` without a CNP: ``alpha <- (1-g) alpha``;
    - rate increase events, each time the timer expires (count ``T``) and each time
      ``byte_counter`` bytes have been sent (count ``BC``): fast recovery while both
      counts are below ``F`` (``Rc <- (Rt + Rc)/2``), additive increase when one of them
      has passed ``F`` (``Rt += R_AI``), hyper increase when both have (``Rt += i R_HAI``,
      ``i = min(T, BC) - F``), then ``Rc <- (Rt + Rc)/2``; capped at the line rate; the
      limiter switches off again when ``Rc`` is within one ``R_AI`` of the line rate.

    Timers are evaluated lazily (when the QP sends or gets a CNP), so DCQCN schedules no
    events. The limiter spaces a QP's messages on its egress: a message of ``W`` wire bytes
    may start at ``next_tx`` and its last packet leaves no earlier than ``W`` at ``Rc``
    after its start.

Params (profile ``nic``): ``dcqcn_g``, ``dcqcn_timer`` [ns], ``dcqcn_byte_counter`` [B],
``dcqcn_f``, ``dcqcn_rate_ai``, ``dcqcn_rate_hai``, ``dcqcn_min_rate`` [bit/s].
"""
from __future__ import annotations


class Dcqcn:
    """Reaction point of one QP (see module doc); rates in bit/s, times in ns."""

    __slots__ = ("line", "rc", "rt", "alpha", "g", "timer", "bc_bytes", "f", "rai", "rhai",
                 "rmin", "active", "t_alpha", "t_timer", "sent", "tcount", "bcount",
                 "next_tx", "cnps")

    def __init__(self, p, line_rate: float) -> None:
        self.line = line_rate
        self.rc = line_rate
        self.rt = line_rate
        self.alpha = 1.0
        self.g = p.dcqcn_g
        self.timer = p.dcqcn_timer
        self.bc_bytes = p.dcqcn_byte_counter
        self.f = p.dcqcn_f
        self.rai = p.dcqcn_rate_ai
        self.rhai = p.dcqcn_rate_hai
        self.rmin = p.dcqcn_min_rate
        self.active = False
        self.t_alpha = 0.0
        self.t_timer = 0.0
        self.sent = 0
        self.tcount = 0
        self.bcount = 0
        self.next_tx = 0.0
        self.cnps = 0

    def _increase(self) -> None:
        t, b, f = self.tcount, self.bcount, self.f
        if t > f and b > f:
            self.rt += (min(t, b) - f) * self.rhai        # hyper increase
        elif t > f or b > f:
            self.rt += self.rai                           # additive increase
        # else fast recovery: Rt unchanged
        if self.rt > self.line:
            self.rt = self.line
        self.rc = (self.rt + self.rc) / 2
        if self.rc > self.line - self.rai:
            self.rc = self.rt = self.line
            self.active = False

    def advance(self, t: float) -> None:
        """Apply the timer events (alpha decay, rate increase) due up to time ``t``."""
        if not self.active:
            return
        k = self.timer
        n = int((t - self.t_alpha) // k)
        if n > 0:
            self.alpha *= (1.0 - self.g) ** n
            self.t_alpha += n * k
        while self.active and self.t_timer + k <= t:
            self.t_timer += k
            self.tcount += 1
            self._increase()

    def on_cnp(self, t: float) -> None:
        """A CNP for this QP arrives at time ``t``: cut the rate."""
        self.cnps += 1
        if self.active:
            self.advance(t)
        else:
            self.active = True
            if self.next_tx < t:
                self.next_tx = t
        self.rt = self.rc
        self.rc = self.rc * (1.0 - self.alpha / 2)
        if self.rc < self.rmin:
            self.rc = self.rmin
        self.alpha = (1.0 - self.g) * self.alpha + self.g
        self.t_alpha = self.t_timer = t
        self.tcount = self.bcount = 0
        self.sent = 0

    def pace(self, ready: float, wire: int) -> tuple[float, float]:
        """A message of ``wire`` bytes is ready at ``ready``: (start, earliest tail) [ns]."""
        self.advance(ready)
        if not self.active:
            return ready, ready
        start = ready if ready > self.next_tx else self.next_tx
        dur = wire * 8e9 / self.rc
        self.next_tx = start + dur
        self.sent += wire
        while self.sent >= self.bc_bytes and self.active:
            self.sent -= self.bc_bytes
            self.bcount += 1
            self._increase()
        return start, start + dur
