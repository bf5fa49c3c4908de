# Types for the compiled build of completer.py (see qpc.pxd).
cimport cython
from rnicsim.hw.atomic cimport AtomicUnit
from rnicsim.hw.cq cimport Cq
from rnicsim.hw.qp cimport Msg, QpHw


cdef class Completer(AtomicUnit):
    @cython.locals(qp=QpHw, now=cython.double, t=cython.double, head=cython.double,
                   t_vis=cython.double)
    cpdef _rx_response(self, Msg msg)

    @cython.locals(t=cython.double)
    cpdef double _cqe_after(self, double t_nic, double t_vis) except? -1.0

    cpdef _complete(self, QpHw qp, wr, status, t_cqe, nbytes, data=*)
    cpdef _push_cqe(self, QpHw qp, Cq cq, wc, t)
