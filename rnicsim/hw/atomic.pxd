# Types for the compiled build of atomic.py (see qpc.pxd).
cimport cython
from rnicsim.hw.pu cimport ProcessingUnits


cdef class AtomicUnit(ProcessingUnits):
    @cython.locals(start=cython.double, done=cython.double, landed=cython.double,
                   now=cython.double, b=cython.double, w=cython.double, i=Py_ssize_t)
    cpdef double _atomic(self, double t, addr) except? -1.0
