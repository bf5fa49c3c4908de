"""Work requests and completions as the NIC sees them (re-exported by :mod:`rnicsim.verbs`).

Opcodes are small ints for speed; ``CATEGORY`` maps each to the service-time class of the
profile (send, write, read, atomic).
"""
from __future__ import annotations

(SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, CAS, FAA, RECV, RECV_RDMA_WITH_IMM,
 WAIT) = range(10)
OPCODE_NAMES = ("SEND", "SEND_WITH_IMM", "WRITE", "WRITE_WITH_IMM", "READ", "CAS", "FAA",
                "RECV", "RECV_RDMA_WITH_IMM", "WAIT")
CATEGORY = ("send", "send", "write", "write", "read", "atomic", "atomic", "send", "write",
            "send")
CARRIES_PAYLOAD = (True, True, True, True, False, False, False, False, False, False)
NEEDS_RD_SLOT = (False, False, False, False, True, True, True, False, False, False)

# Completion status codes (ibv_wc_status subset).
(SUCCESS, LOC_LEN_ERR, REM_ACCESS_ERR, RETRY_EXC_ERR, WR_FLUSH_ERR, RNR_RETRY_EXC_ERR,
 REM_INV_REQ_ERR) = range(7)
STATUS_NAMES = ("SUCCESS", "LOC_LEN_ERR", "REM_ACCESS_ERR", "RETRY_EXC_ERR", "WR_FLUSH_ERR",
                "RNR_RETRY_EXC_ERR", "REM_INV_REQ_ERR")

# Transport extension headers [B] (InfiniBand spec vol. 1, ch. 9): added to the profile's
# per-packet overhead.
RETH, AETH, ATOMIC_ETH, ATOMIC_ACK_ETH, DETH, IMMDT, GRH = 16, 4, 28, 8, 8, 4, 40


class WorkRequest:
    """One send-queue or receive-queue work request (``ibv_send_wr``/``ibv_recv_wr``).

    Fields: ``opcode`` (SEND, WRITE, READ, CAS, FAA, ... RECV), ``length`` [B],
    ``wr_id`` (returned in the completion), ``signaled`` (write a CQE),
    ``inline`` (payload copied into the WQE: no DMA read), ``local``/``local_offset``
    (local memory region or None: no data is copied), ``rkey``/``remote_offset`` (remote
    region for one-sided verbs), ``imm`` (immediate data), ``compare_add``/``swap``
    (atomics), ``dest`` (UD address handle: ``(nic_id, qpn)``), ``data`` (bytes to send
    when no local region is given). A ``WAIT`` request (CORE-Direct cross-channel wait)
    holds the send queue until ``wait_cq`` has received ``wait_count`` completions in
    total; the NIC then goes on with the following WQEs by itself, with no CPU involved.
    """

    __slots__ = ("opcode", "length", "wr_id", "signaled", "inline", "local", "local_offset",
                 "rkey", "remote_offset", "imm", "compare_add", "swap", "dest", "data",
                 "t_post", "wait_cq", "wait_count")

    def __init__(self, opcode: int, length: int = 0, wr_id: object = None,
                 signaled: bool = True, inline: bool = False, local=None,
                 local_offset: int = 0, rkey: int | None = None, remote_offset: int = 0,
                 imm: int | None = None, compare_add: int = 0, swap: int = 0,
                 dest: tuple[int, int] | None = None, data: bytes | None = None) -> None:
        self.opcode = opcode
        self.length = length
        self.wr_id = wr_id
        self.signaled = signaled
        self.inline = inline
        self.local = local
        self.local_offset = local_offset
        self.rkey = rkey
        self.remote_offset = remote_offset
        self.imm = imm
        self.compare_add = compare_add
        self.swap = swap
        self.dest = dest
        self.data = data
        self.t_post = 0.0
        self.wait_cq = None
        self.wait_count = 0


class WorkCompletion:
    """One completion (``ibv_wc``): ``wr_id``, ``status``, ``opcode``, ``byte_len``,
    ``imm``, ``qp_num``, ``src`` (sender ``(nic_id, qpn)`` for receives), ``data`` (received
    or read bytes when no local region was given), ``t_post`` [ns] when the WR was posted.
    """

    __slots__ = ("wr_id", "status", "opcode", "byte_len", "imm", "qp_num", "src", "data",
                 "t_post")

    def __init__(self, wr_id, status, opcode, byte_len, qp_num, imm=None, src=None,
                 data=None, t_post=0.0) -> None:
        self.wr_id = wr_id
        self.status = status
        self.opcode = opcode
        self.byte_len = byte_len
        self.imm = imm
        self.qp_num = qp_num
        self.src = src
        self.data = data
        self.t_post = t_post

    @property
    def ok(self) -> bool:
        """True when the status is SUCCESS."""
        return self.status == SUCCESS

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return (f"WC(wr_id={self.wr_id!r}, {STATUS_NAMES[self.status]}, "
                f"{OPCODE_NAMES[self.opcode]}, len={self.byte_len})")
