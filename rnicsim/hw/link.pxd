# Types for the compiled build of link.py (Cython pure-Python mode, see calendar.pxd and
# setup.py). Counts, sizes in bytes and the rate stay Python objects (ints, as in the
# model: their arithmetic is Python's); times and per-byte times are C doubles. transmit
# reaches the calendars of the route's directions through C calls.
cimport cython
from rnicsim.hw.calendar cimport Calendar

cdef double _INF


cdef class LinkDir:
    cdef public object name, rate, buffer, bytes, msgs, mtu_bytes, pfc, ecn, ecn_marks, tap
    cdef public double prop, sw_lat, ns_per_byte, quantum
    cdef public Calendar cal
    cdef public bint interleave
    cdef public dict pstate


@cython.locals(first=LinkDir, l=LinkDir, prev=LinkDir, ser=cython.double,
               split=cython.bint, start=cython.double, end=cython.double,
               contiguous=cython.bint, t_last=cython.double, head=cython.double,
               tail=cython.double, prev_end=cython.double, ready=cython.double,
               hold=cython.double, w1=cython.double, t_tail=cython.double,
               new_tail=cython.double, span=cython.double)
cpdef double transmit(path, double t, nbytes, tail_ready=*, last_pkt=*, prio=*, pkt=*,
                      track=*, flow=*) except? -1.0
