# Types for the compiled build of the RNIC's parts (Cython pure-Python mode, see
# calendar.pxd and setup.py). The parts are one chain of classes, compiled as C classes:
# ContextCaches <- ProcessingUnits <- AtomicUnit <- Completer <- Requester <- Responder,
# and rnicsim.hw.rnic.Rnic, a Python class, on top (so tests and tools may still replace
# its methods). ContextCaches, the root, declares every field of the NIC, so that no
# NIC has a __dict__ of its own on the per-verb path (a method a part calls on another
# is then a C call: Cython's check for a Python override is one compare when the object
# has no __dict__). Times are C doubles; sizes, counts and keys stay Python objects.
cimport cython
from rnicsim.hw.arbiter cimport TxArbiter
from rnicsim.hw.cache cimport LruCache, QpLru
from rnicsim.hw.pcie cimport Pcie
from rnicsim.hw.qp cimport Msg, QpHw


cdef class ContextCaches:
    cdef public object sim, env, trace, id, node, name, memory, p, mtu, pkt_ovh
    cdef public object _mtt_ready_max, max_rd, fabric, _next_qpn, ack_bytes, seg_pkts
    cdef public object ud_grh_write, line_rate
    cdef public TxArbiter tx
    cdef public list pu_busy, pu_log, atomic_busy
    cdef public tuple req_t, resp_t, comp_t
    cdef public dict mtt_ready, atomic_addr, qps, counters, _cnp_last
    cdef public set _held
    cdef public Pcie pcie
    cdef public QpLru qpc
    cdef public LruCache mtt
    cdef public double pu_work_ns, per_pkt, ns_per_byte_in
    cdef public bint qpc_stall, stall_nic, up, dcqcn, seg_on

    @cython.locals(r=cython.double)
    cpdef double _qpc_lookup(self, QpHw qp, double t) except? -1.0

    @cython.locals(t0=cython.double, r=cython.double)
    cpdef double _translate(self, mr, offset, n, double t) except? -1.0
