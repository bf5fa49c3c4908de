# Types for the compiled build of cache.py (Cython pure-Python mode, see calendar.pxd).
cdef class LruCache:
    cdef public object entries, _d
    cdef public Py_ssize_t hits, misses

    cpdef bint access(self, key) except -1
