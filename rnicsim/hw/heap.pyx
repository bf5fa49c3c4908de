# cython: language_level=3, boundscheck=False, wraparound=False
"""The event heap, compiled: the same order and semantics as heap.py (read its docstring),
as a binary heap of C structs (heap.pxd) compared on C doubles and integers instead of
tuples compared by Python's rich comparison.

Any correct priority queue over the same unique keys takes entries in the same order, so
the sift routines need not mirror heapq's; ``tests/unit/test_heap.py`` checks the order
against heap.py.
"""
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject

from simpy.core import EmptySchedule, Infinity, StopSimulation

cdef long NORMAL = 1


# The entries' objects are held from a C array, which the cyclic garbage collector cannot
# see on its own: a simulation dropped with events still scheduled (every run that stops
# at ``until``) is a cycle through them (event -> process -> environment -> heap), so the
# heap's type gets a traverse that visits them and a clear that drops them, beside
# Cython's for the heap's fields. Without them such simulations are never freed.
cdef extern from "Python.h":
    ctypedef int (*visitproc_t "visitproc")(PyObject*, void*) noexcept
    ctypedef int (*traverseproc_t "traverseproc")(PyObject*, visitproc_t, void*) noexcept
    ctypedef int (*inquiry_t "inquiry")(PyObject*) noexcept
    ctypedef struct TypeSlots "PyTypeObject":
        traverseproc_t tp_traverse
        inquiry_t tp_clear

cdef traverseproc_t _fields_traverse
cdef inquiry_t _fields_clear


cdef int _traverse(PyObject* o, visitproc_t visit, void* arg) noexcept:
    cdef EventHeap h = <EventHeap>o
    cdef Py_ssize_t i
    cdef int r
    for i in range(h.n):
        r = visit(h.q[i].tobj, arg)
        if r:
            return r
        r = visit(h.q[i].a, arg)
        if r:
            return r
        if h.q[i].b != NULL:
            r = visit(h.q[i].b, arg)
            if r:
                return r
    return _fields_traverse(o, visit, arg)


cdef void _release(Entry* q, Py_ssize_t n) noexcept:
    """Drop the references of the ``n`` entries of ``q`` and free it."""
    cdef Py_ssize_t i
    for i in range(n):
        Py_XDECREF(q[i].tobj)
        Py_XDECREF(q[i].a)
        Py_XDECREF(q[i].b)
    PyMem_Free(q)


cdef int _clear(PyObject* o) noexcept:
    cdef EventHeap h = <EventHeap>o
    cdef Entry* q = h.q
    cdef Py_ssize_t n = h.n
    # Detach the entries first: a DECREF below may run code that schedules again.
    h.q = NULL
    h.n = 0
    h.cap = 0
    _release(q, n)
    return _fields_clear(o)


cdef inline bint _lt(Entry* x, Entry* y) noexcept nogil:
    """(t, prio, id) of x below that of y (ids are unique: a strict total order)."""
    if x.t != y.t:
        return x.t < y.t
    if x.prio != y.prio:
        return x.prio < y.prio
    return x.id < y.id


cdef class EventHeap:
    """The scheduled entries of the environment ``env`` (see heap.py)."""

    def __cinit__(self, env):
        self.q = NULL
        self.n = 0
        self.cap = 0
        self.eid = 0
        self.env = env
        self.envd = env.__dict__

    def __dealloc__(self):
        _release(self.q, self.n)

    def __len__(self):
        return self.n

    @property
    def scheduled(self):
        """Entries scheduled so far (the next id)."""
        return self.eid

    cdef int _push(self, object tobj, long prio, object a, object b) except -1:
        cdef Entry e
        cdef Entry* q
        cdef Py_ssize_t hole, parent
        if self.n == self.cap:
            cap = 64 if self.cap == 0 else 2 * self.cap
            q = <Entry*>PyMem_Realloc(self.q, cap * sizeof(Entry))
            if q == NULL:
                raise MemoryError()
            self.q = q
            self.cap = cap
        e.t = tobj          # float(tobj): an int time converts exactly below 2**53
        e.prio = prio
        e.id = self.eid
        self.eid += 1
        Py_INCREF(tobj)
        e.tobj = <PyObject*>tobj
        Py_INCREF(a)
        e.a = <PyObject*>a
        if b is None:
            e.b = NULL
        else:
            Py_INCREF(b)
            e.b = <PyObject*>b
        q = self.q
        hole = self.n
        self.n += 1
        while hole > 0:
            parent = (hole - 1) >> 1
            if _lt(&e, &q[parent]):
                q[hole] = q[parent]
                hole = parent
            else:
                break
        q[hole] = e
        return 0

    cdef Entry _pop(self):
        """The smallest entry, its references handed to the caller (n > 0)."""
        cdef Entry* q = self.q
        cdef Entry top = q[0]
        cdef Entry last
        cdef Py_ssize_t hole = 0, c, n
        self.n -= 1
        n = self.n
        if n:
            last = q[n]
            while True:
                c = 2 * hole + 1
                if c >= n:
                    break
                if c + 1 < n and _lt(&q[c + 1], &q[c]):
                    c += 1
                if _lt(&q[c], &last):
                    q[hole] = q[c]
                    hole = c
                else:
                    break
            q[hole] = last
        return top

    cpdef schedule(self, event, long priority=NORMAL, delay=0):
        """``simpy.Environment.schedule``: ``event`` at ``env._now + delay``."""
        self._push(self.envd["_now"] + delay, priority, event, None)

    cpdef schedule_at(self, event, t, long priority=NORMAL):
        """``event`` at the absolute time ``t`` [ns] (>= now)."""
        self._push(t, priority, event, None)

    def call_at(self, t, fn, *args):
        """Call ``fn(*args)`` at the absolute time ``t`` [ns] (>= now), priority NORMAL."""
        self._push(t, NORMAL, fn, args)

    def call_in(self, delay, fn, *args):
        """Call ``fn(*args)`` ``delay`` [ns] from now."""
        self._push(self.envd["_now"] + delay, NORMAL, fn, args)

    def peek(self):
        """``simpy.Environment.peek``: the time of the next entry, or Infinity."""
        if self.n == 0:
            return Infinity
        return <object>self.q[0].tobj

    def step(self):
        """``simpy.Environment.step``: take and process the next entry (EmptySchedule
        when there is none)."""
        if self.n == 0:
            raise EmptySchedule()
        self._take()

    def run(self):
        """Take and process entries until none is left (or one raises, e.g.
        StopSimulation)."""
        while self.n:
            self._take()

    cdef _take(self):
        cdef Entry e = self._pop()
        # Own the entry's references as Python objects (the casts add one, the DECREFs
        # drop the heap's), so an exception below frees them.
        tobj = <object>e.tobj
        Py_DECREF(tobj)
        ev = <object>e.a
        Py_DECREF(ev)
        self.envd["_now"] = tobj
        if e.b != NULL:
            args = <object>e.b
            Py_DECREF(args)
            ev(*args)
            return
        # A SimPy event: exactly Environment.step after its pop.
        callbacks = ev.callbacks
        ev.callbacks = None
        try:
            for cb in callbacks:
                cb(ev)
        except StopSimulation:
            ev.callbacks = callbacks[callbacks.index(cb) + 1:]
            self.schedule(ev, -1, 0)
            raise
        if not ev._ok and not hasattr(ev, "_defused"):
            exc = type(ev._value)(*ev._value.args)
            exc.__cause__ = ev._value
            raise exc


_fields_traverse = (<TypeSlots*><void*>EventHeap).tp_traverse
_fields_clear = (<TypeSlots*><void*>EventHeap).tp_clear
(<TypeSlots*><void*>EventHeap).tp_traverse = _traverse
(<TypeSlots*><void*>EventHeap).tp_clear = _clear
