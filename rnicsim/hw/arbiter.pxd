# Types for the compiled build of arbiter.py (Cython pure-Python mode, see calendar.pxd
# and setup.py): the arbiters are C classes, so the RNIC's call to submit and the
# arbiter's searches of the egress calendar are C calls.
cimport cython
from rnicsim.hw.calendar cimport Calendar
from rnicsim.hw.link cimport LinkDir

cdef double _INF


cdef class TxArbiter:
    cpdef submit(self, flow, LinkDir eg, double ready, prio, first_bytes, emit, tuple args)
    cpdef bint goes_now(self, flow, LinkDir eg, double ready, prio,
                        double first_bytes) except -1
    cpdef wait(self, flow, LinkDir eg, double ready, prio, first_bytes, emit, tuple args)
    cpdef hold_wire(self, seg)
    cpdef release_wire(self, seg)


cdef class Fifo(TxArbiter):
    cpdef bint goes_now(self, flow, LinkDir eg, double ready, prio,
                        double first_bytes) except -1
    cpdef wait(self, flow, LinkDir eg, double ready, prio, first_bytes, emit, tuple args)


cdef class PerPacket(Fifo):
    pass


cdef class PerMessageRoundRobin(TxArbiter):
    cdef public object nic, sim, ring, pull_at, last, hold
    cdef public dict txq, durs
    cdef public list heads
    cdef public Py_ssize_t seq
    cdef public double last_at

    @cython.locals(start=cython.double)
    cpdef bint goes_now(self, flow, LinkDir eg, double ready, prio,
                        double first_bytes) except -1
    cpdef wait(self, flow, LinkDir eg, double ready, prio, first_bytes, emit, tuple args)

    @cython.locals(t2=cython.double)
    cpdef double _free_at(self, LinkDir eg, double t, prio, double dur=*) except? -1.0

    cpdef _sent(self, flow, double start)

    @cython.locals(eg=LinkDir)
    cpdef _wait_wire(self, flow, double ready, prio, double dur, emit, tuple args)

    cpdef _head_in(self, flow, tuple msg)

    @cython.locals(now=cython.double)
    cpdef _pull(self, prio, double at)

    @cython.locals(now=cython.double, eg=LinkDir, w=cython.double, free=cython.double,
                   first=cython.double, fmax=cython.double, wq=cython.double,
                   n=Py_ssize_t, i=Py_ssize_t, ready=cython.double, dur=cython.double,
                   t_ok=cython.double, f=cython.double)
    cpdef _on_pull(self, prio)

    @cython.locals(ready=cython.double, dur=cython.double)
    cpdef _commit_head(self, flow, LinkDir eg, prio, double free, double now, bint at_end,
                       fits)
