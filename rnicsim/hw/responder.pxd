# Types for the compiled build of responder.py (see qpc.pxd).
cimport cython
from rnicsim.hw.link cimport transmit
from rnicsim.hw.qp cimport Msg, QpHw, track
from rnicsim.hw.requester cimport Requester


cdef class Responder(Requester):
    @cython.locals(now=cython.double, qp=QpHw, t=cython.double, head=cython.double)
    cpdef _rx_request(self, Msg msg)

    @cython.locals(req_qp=QpHw, desc=cython.double, t_vis=cython.double)
    cpdef _rx_send(self, QpHw qp, Msg msg, double t, double head, double now)

    @cython.locals(req_qp=QpHw, desc=cython.double, t_vis=cython.double)
    cpdef _rx_write(self, QpHw qp, Msg msg, double t, double head, double now)

    @cython.locals(req_qp=QpHw, resp=Msg, f=cython.double, l=cython.double)
    cpdef _rx_read(self, QpHw qp, Msg msg, double t, double head, double now)

    cpdef tuple _target(self, QpHw qp, Msg msg, n, double t)

    cpdef _reply(self, QpHw qp, QpHw req_qp, Msg resp, double ready, wire, tail=*,
                 last_pkt=*)

    @cython.locals(arrive=cython.double)
    cpdef _emit_reply(self, double t, QpHw qp, QpHw req_qp, Msg resp, path, double ready,
                      wire, tail, last_pkt)

    cpdef _after_reply(self, QpHw qp, QpHw req_qp, Msg resp, path, double ready, tail,
                       double arrive)

    cpdef _ack(self, QpHw qp, Msg msg, double t)
