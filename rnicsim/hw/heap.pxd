# The compiled event heap (heap.pyx; heap.py is the pure-Python reference): entries are
# C structs compared on (double t, long priority, long long id), the time object, the
# event or callback and its argument tuple held as owned references.
from cpython.ref cimport PyObject


cdef struct Entry:
    double t            # the time as a C double, for comparisons
    long prio
    long long id
    PyObject* tobj      # the time as handed in (becomes env._now)
    PyObject* a         # the SimPy event, or the callback
    PyObject* b         # NULL for an event, else the callback's argument tuple


cdef class EventHeap:
    cdef Entry* q
    cdef Py_ssize_t n, cap
    cdef long long eid
    cdef object env
    cdef dict envd      # env.__dict__, where env._now lives

    cdef int _push(self, object tobj, long prio, object a, object b) except -1
    cdef Entry _pop(self)
    cpdef schedule(self, event, long priority=*, delay=*)
    cpdef schedule_at(self, event, t, long priority=*)
    cdef _take(self)
