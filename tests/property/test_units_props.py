"""Laws of rnicsim.units: parsing round trips and the algebra of tx_time_ns."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rnicsim.units import (fmt_time, parse_bytes, parse_freq_hz, parse_rate_bps,
                           parse_time_ns, tx_time_ns)

TIME = {"ps": 1e-3, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
SIZE = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KiB": 1024, "MiB": 1024**2,
        "GiB": 1024**3, "K": 1024, "M": 1024**2, "G": 1024**3}
RATE = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12, "GB/s": 8e9,
        "MB/s": 8e6}
FREQ = {"Hz": 1.0, "KHz": 1e3, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}

counts = st.integers(min_value=0, max_value=10**6)
positive = st.integers(min_value=1, max_value=10**6)
sizes = st.integers(min_value=0, max_value=1 << 40)
rates = st.floats(min_value=1e6, max_value=1e13, allow_nan=False, allow_infinity=False)
spaces = st.sampled_from(["", " "])


@given(counts, st.sampled_from(sorted(TIME)), spaces)
def test_time_unit_round_trip(n, unit, sp):
    """``f"{n}{unit}"`` parses to n times the unit's size in ns."""
    assert parse_time_ns(f"{n}{sp}{unit}") == pytest.approx(n * TIME[unit], rel=1e-12)


@given(counts, st.sampled_from(sorted(SIZE)))
def test_size_unit_round_trip(n, unit):
    """``f"{n}{unit}"`` parses to exactly n times the unit in bytes."""
    assert parse_bytes(f"{n}{unit}") == n * SIZE[unit]


@given(sizes)
def test_bytes_round_trip_through_text(n):
    """A byte count written as ``"<n>B"``, ``"<n>"`` or an int parses back to itself."""
    assert parse_bytes(f"{n}B") == parse_bytes(str(n)) == parse_bytes(n) == n


@given(st.integers(min_value=0, max_value=1 << 20), st.sampled_from(["KiB", "MiB"]))
def test_binary_sizes_with_underscores(n, unit):
    """Underscore digit separators are ignored: ``1_024KiB == 1024KiB``."""
    text = f"{n:_}{unit}"
    assert parse_bytes(text) == n * SIZE[unit]


@given(positive, st.sampled_from(sorted(RATE)))
def test_rate_unit_round_trip(n, unit):
    """``f"{n}{unit}"`` parses to n times the unit in bit/s."""
    assert parse_rate_bps(f"{n}{unit}") == pytest.approx(n * RATE[unit], rel=1e-12)


@given(positive, st.sampled_from(sorted(FREQ)))
def test_freq_unit_round_trip(n, unit):
    """``f"{n}{unit}"`` parses to n times the unit in Hz."""
    assert parse_freq_hz(f"{n}{unit}") == pytest.approx(n * FREQ[unit], rel=1e-12)


@given(st.floats(min_value=0, max_value=1e12, allow_nan=False))
def test_fmt_time_parses_back_within_its_precision(ns):
    """fmt_time's 3 significant digits parse back to within 0.5 %."""
    assert parse_time_ns(fmt_time(ns)) == pytest.approx(ns, rel=5e-3, abs=1e-9)


@given(st.floats(min_value=1e-3, max_value=1e9, allow_nan=False))
def test_repr_of_a_float_duration_round_trips_exactly(ns):
    """``repr(x) + "ns"`` parses back to exactly x (no precision is lost in parsing)."""
    assert parse_time_ns(f"{ns!r}ns") == ns


@given(sizes, sizes, rates)
def test_tx_time_is_additive(a, b, rate):
    """Sending a then b takes as long as sending a + b."""
    assert tx_time_ns(a, rate) + tx_time_ns(b, rate) == \
        pytest.approx(tx_time_ns(a + b, rate), rel=1e-12, abs=1e-12)


@given(sizes, rates, st.integers(min_value=1, max_value=64))
def test_tx_time_scales_inversely_with_rate(n, rate, k):
    """k times the rate takes 1/k of the time."""
    assert tx_time_ns(n, rate * k) * k == pytest.approx(tx_time_ns(n, rate), rel=1e-12,
                                                        abs=1e-12)


@given(sizes, rates)
def test_tx_time_inverts_to_the_size(n, rate):
    """time * rate / 8 recovers the size; the time is never negative."""
    t = tx_time_ns(n, rate)
    assert t >= 0
    assert t * rate / 8e9 == pytest.approx(n, rel=1e-12, abs=1e-9)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(sorted(TIME)))
def test_negative_durations_are_rejected(n, unit):
    """A negative number with any unit is rejected."""
    with pytest.raises(ValueError):
        parse_time_ns(f"-{n}{unit}")
    with pytest.raises(ValueError):
        parse_time_ns(-float(n))
