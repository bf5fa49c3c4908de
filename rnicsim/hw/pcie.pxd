# Types for the compiled build of pcie.py (Cython pure-Python mode, see calendar.pxd and
# setup.py). Sizes in bytes and the rate stay Python objects (ints: their arithmetic is
# Python's); times and per-byte times are C doubles; the two directions' calendars are
# reached through C calls.
cimport cython
from rnicsim.hw.calendar cimport Calendar


cdef class Pcie:
    cdef public object rate, ovh, mps, bytes_up, bytes_down, tap
    cdef public double lat, mmio_lat, npb, req_dur, tlp_dur
    cdef public Calendar up, down

    @cython.locals(npb=cython.double, dur=cython.double, start=cython.double,
                   end=cython.double, last=cython.double)
    cpdef double dma_write(self, double t, nbytes, tail=*) except? -1.0

    @cython.locals(rdur=cython.double, rstart=cython.double, at_host=cython.double,
                   dur=cython.double, cstart=cython.double, cend=cython.double)
    cpdef double dma_read(self, double t, nbytes) except? -1.0

    @cython.locals(dur=cython.double, start=cython.double, end=cython.double)
    cpdef double mmio(self, double t, nbytes) except? -1.0
