# Types for the compiled build of calendar.py (Cython pure-Python mode: calendar.py stays
# the model, this file only declares C types; see setup.py). Every float is a C double,
# which is what a Python float is, and the compiler is told not to contract or reorder
# (-ffp-contract=off, no fast-math), so both builds give the same bits. Floor division
# (reserve_split) stays on Python objects: Cython's double // is floor(a / b), not
# Python's.
cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memcpy, memmove

cdef double _INF


cdef class Doubles:
    cdef double* v
    cdef public Py_ssize_t n
    cdef Py_ssize_t cap

    @cython.locals(cap=Py_ssize_t, p=cython.p_void)
    cdef int _room(self, Py_ssize_t n) except -1
    cdef int append(self, double x) except -1
    cdef int insert(self, Py_ssize_t i, double x) except -1
    cdef void delete(self, Py_ssize_t i, Py_ssize_t j) noexcept
    @cython.locals(out=Doubles)
    cdef Doubles tail(self, Py_ssize_t i)
    @cython.locals(k=Py_ssize_t, out=list)
    cpdef list tolist(self)


@cython.locals(out=Doubles)
cpdef Doubles doubles(items)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, x_mid=double)
cpdef Py_ssize_t _after(Doubles a, double x) except -1

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, x_mid=double)
cpdef Py_ssize_t _before(Doubles a, double x) except -1

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, cand=double, end=double, e=double)
cdef double _first_fit(Doubles starts, Doubles ends, double t, double dur) except? -1.0

@cython.locals(i=Py_ssize_t, n=Py_ssize_t, j=Py_ssize_t, lo=double, hi=double,
               covered=double, s=double, e=double, ov=double)
cdef double _insert(Doubles starts, Doubles ends, double a, double b) except? -1.0

@cython.locals(i=Py_ssize_t, removed=double, s=double, e=double)
cdef double _remove(Doubles starts, Doubles ends, double a, double b) except? -1.0


cdef class Calendar:
    cdef public Doubles _starts, _ends, pstarts, pends
    cdef public list held
    cdef public double busy_ns, mixed, _prune_at
    cdef public object env, rr
    cdef public bint lane_on

    cpdef double reserve(self, double t, double dur) except? -1.0
    cpdef double start_if_booked(self, double t, double dur) except? -1.0

    @cython.locals(ends=Doubles, starts=Doubles, pends=Doubles, n=Py_ssize_t, i=Py_ssize_t,
                   lane=bint, cand=double, end=double, e=double, s0=double, turn=double,
                   s=double, debt=double, d0=double, q=double)
    cpdef double reserve_packet(self, double t, double dur, double quantum, src=*,
                                flow=*) except? -1.0

    @cython.locals(q=double, d=double, span=double, s=double, e=double, got=double,
                   gone=double)
    cdef double _queued(self, double t) except? -1.0

    @cython.locals(now=double, keep=list)
    cdef _push_back(self, double s, double e, double dur, src)

    cdef _lane_start(self)

    # t, dur and chunk stay Python floats: the floor division (see the top).
    @cython.locals(ends=Doubles, starts=Doubles, i=Py_ssize_t, n=Py_ssize_t)
    cpdef tuple reserve_split(self, t, dur, chunk)

    cpdef book_piece(self, double a, double b)
    cpdef book_packet(self, double a, double b)
    cpdef block(self, double t0, double t1)
    cpdef free(self, double a, double b)
    @cython.locals(i=Py_ssize_t)
    cpdef prune(self, double now)
