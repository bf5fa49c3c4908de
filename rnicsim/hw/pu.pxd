# Types for the compiled build of pu.py (see qpc.pxd). _serve takes any object with a
# Msg's npkts, wire and kind (tests hand it stand-ins).
cimport cython
from rnicsim.hw.qp cimport Msg, QpHw
from rnicsim.hw.qpc cimport ContextCaches


cdef class ProcessingUnits(ContextCaches):
    @cython.locals(pu=Py_ssize_t, busy=cython.double, first=cython.double,
                   b0=cython.double, meanwhile=cython.double, i=Py_ssize_t,
                   t=cython.double, s0=cython.double, ctx=cython.double,
                   head=cython.double, rest=cython.double, own=cython.double,
                   last=cython.double, done=cython.double)
    cpdef tuple _serve(self, QpHw qp, msg, double svc, double now)

    cpdef _pu_logged(self, Py_ssize_t pu, double now, double before, double work)
