# Types for the compiled build of requester.py (see qpc.pxd).
cimport cython
from rnicsim.hw.completer cimport Completer
from rnicsim.hw.link cimport transmit
from rnicsim.hw.qp cimport Msg, QpHw, hold_back, track


cdef class Requester(Completer):
    cpdef doorbell(self, QpHw qp, wrs)

    @cython.locals(now=cython.double, pu=Py_ssize_t, before=cython.double,
                   t=cython.double, t0=cython.double, i=Py_ssize_t, ctx=cython.double,
                   svc=cython.double, s=cython.double, head=cython.double,
                   tail=cython.double, f=cython.double, l=cython.double,
                   pu_busy=list)
    cpdef _run_sq(self, QpHw qp, wrs, Py_ssize_t start)

    @cython.locals(msg=Msg)
    cpdef _send_request(self, QpHw qp, wr, op, length, npk, double ready, double tail)

    @cython.locals(arrive=cython.double)
    cpdef _emit_request(self, double t, QpHw qp, wr, Msg msg, path, dst_id, double ready,
                        double tail, wire, npk, length)

    @cython.locals(t_sent=cython.double, t_cqe=cython.double)
    cpdef _after_request(self, QpHw qp, wr, Msg msg, path, dst_id, double ready,
                         double tail, wire, length, double arrive)
