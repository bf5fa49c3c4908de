# Types for the compiled build of host.py (Cython pure-Python mode, see calendar.pxd and
# setup.py): a core's busy-until and busy time are C doubles, and a thread's booking of
# CPU work (reserve, from the completion queue and the verbs layer) is a C call. Hogs
# (time slicing) stays a Python class.
cimport cython


@cython.locals(exit_ns=double, ex=double, res=double)
cpdef double idle_exit_ns(dict states, double idle_ns) except? -1.0


cdef class Core:
    cdef public object name, hogs
    cdef public double busy_until, busy_ns


cdef class CpuThread:
    cdef public object sim, name, host, node
    cdef public Core core
    cdef public bint sleeps

    @cython.locals(c=Core, start=cython.double, end=cython.double)
    cpdef double reserve(self, double t, double ns) except? -1.0
