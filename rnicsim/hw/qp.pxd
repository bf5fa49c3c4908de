# Types for the compiled build of qp.py (Cython pure-Python mode, see calendar.pxd and
# setup.py): a QP's and a message's state as C fields. Times are C doubles; counts,
# sizes and keys stay Python objects (ints, as in the model) except the few the per-verb
# path compares or indexes with (PU index, outstanding READs, ACK count, packets, kind).
cimport cython

cdef double _INF


cdef class QpHw:
    cdef public object qpn, type, nic, send_cq, recv_cq, state, pending, recvs, recv_at
    cdef public object peer, path, inflight, seq, on_error, prio, cc, seg, seg_wait
    cdef public object rseg, rseg_wait
    cdef public Py_ssize_t pu, rd_out, ack_count
    cdef public double last_cqe, timeout_ns, ctx_ready, db_ready, tx_ready, arrive_last
    cdef public double resp_ready, resp_arrive_last, hold_req, hold_resp, shift_req
    cdef public double shift_resp
    cdef public bint waiting, lru_in
    cdef public QpHw lru_prev, lru_next


cdef class Msg:
    cdef public Py_ssize_t kind, npkts
    cdef public object wr, dst_qpn, src, seq, data, old, wire, ecn
    cdef public QpHw qp
    cdef public double late


cpdef hold_back(QpHw qp, wrs)
cpdef track(QpHw qp, seq, wr)
