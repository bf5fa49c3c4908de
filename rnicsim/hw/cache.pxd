# Types for the compiled build of cache.py (Cython pure-Python mode, see calendar.pxd).
cimport cython
from rnicsim.hw.qp cimport QpHw

cdef class LruCache:
    cdef public object entries, _d
    cdef public Py_ssize_t hits, misses

    cpdef bint access(self, key) except -1


cdef class QpLru:
    cdef public Py_ssize_t entries, n, hits, misses
    cdef public QpHw head, tail

    @cython.locals(nxt=QpHw, prev=QpHw, old=QpHw)
    cpdef bint access(self, QpHw qp) except -1
    @cython.locals(tail=QpHw)
    cdef void _append(self, QpHw qp) noexcept
