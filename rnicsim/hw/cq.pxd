# Types for the compiled build of cq.py (Cython pure-Python mode, see calendar.pxd and
# setup.py): the NIC's side of a completion queue (push, and arming the waiting thread's
# wake-up) is C calls from the completer, and taking completions books the thread's CPU
# through a C call.
cimport cython
from rnicsim.hw.host cimport CpuThread


cdef class Cq:
    cdef public object sim, name, host, _waiter, mode
    cdef public list _heap, _nic_waits
    cdef public Py_ssize_t _seq, pushed, taken
    cdef public double loop_delay

    cpdef push(self, wc, t_visible)

    @cython.locals(thread=CpuThread, t=cython.double, busy=cython.double)
    cpdef _arm(self, t_visible)

    @cython.locals(heap=list, out=list)
    cpdef list take(self, max_n=*)

    @cython.locals(thread=CpuThread, t=cython.double)
    cpdef _fill(self, ev)
