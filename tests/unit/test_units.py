"""rnicsim.units: parsing of durations, sizes, rates and frequencies; tx_time_ns; fmt_time."""
from __future__ import annotations

import math

import pytest

from rnicsim.units import (MS, S, US, fmt_time, parse_bytes, parse_freq_hz, parse_rate_bps,
                           parse_time_ns, tx_time_ns)


@pytest.mark.parametrize("text, ns", [
    ("300ns", 300.0), ("1.5us", 1500.0), ("1.5µs", 1500.0), ("2ms", 2e6), ("1s", 1e9),
    ("250ps", 0.25), ("0ns", 0.0), (" 40 us ", 40_000.0), ("1_000ns", 1000.0),
    ("1e3ns", 1000.0), ("2.5e-1us", 250.0), (".5us", 500.0), ("300", 300.0),
    (300, 300.0), (12.5, 12.5),
])
def test_parse_time_ns(text, ns):
    """Durations with every unit (and bare numbers, taken as ns) parse to nanoseconds."""
    assert parse_time_ns(text) == pytest.approx(ns, rel=1e-12)
    assert isinstance(parse_time_ns(text), float)


@pytest.mark.parametrize("text, n", [
    ("64B", 64), ("4KiB", 4096), ("4KB", 4000), ("2MiB", 2 << 20), ("1MB", 10**6),
    ("1GiB", 1 << 30), ("3GB", 3 * 10**9), ("4K", 4096), ("2M", 2 << 20), ("1G", 1 << 30),
    ("1.5KiB", 1536), ("0B", 0), ("64", 64), (64, 64), (4096.0, 4096), ("1_024B", 1024),
])
def test_parse_bytes(text, n):
    """Sizes in decimal and binary units parse to a whole number of bytes (an int)."""
    v = parse_bytes(text)
    assert v == n and type(v) is int


@pytest.mark.parametrize("text, bps", [
    ("100Gbps", 100e9), ("40Gbps", 40e9), ("56Mbps", 56e6), ("10Kbps", 1e4),
    ("1Tbps", 1e12), ("12.5GB/s", 100e9), ("100MB/s", 800e6), ("9600bps", 9600.0),
    ("1e9", 1e9), (25e9, 25e9),
])
def test_parse_rate_bps(text, bps):
    """Rates in bit/s and byte/s units parse to bit/s."""
    assert parse_rate_bps(text) == pytest.approx(bps, rel=1e-12)


@pytest.mark.parametrize("text, hz", [
    ("2.2GHz", 2.2e9), ("800MHz", 8e8), ("10kHz", 1e4), ("10KHz", 1e4), ("50Hz", 50.0),
    (3e9, 3e9),
])
def test_parse_freq_hz(text, hz):
    """Frequencies parse to Hz."""
    assert parse_freq_hz(text) == pytest.approx(hz, rel=1e-12)


@pytest.mark.parametrize("parse, text, words", [
    (parse_time_ns, "30 fortnights", ["unknown unit", "'fortnights'", "ns"]),
    (parse_time_ns, "5Gbps", ["unknown unit", "duration"]),
    (parse_bytes, "64 parsecs", ["unknown unit", "size", "KiB"]),
    (parse_bytes, "4kib", ["unknown unit", "'kib'"]),       # units are case-sensitive
    (parse_rate_bps, "100Gbit", ["unknown unit", "rate", "Gbps"]),
    (parse_rate_bps, "100ns", ["unknown unit"]),
    (parse_freq_hz, "2.2Ghz", ["unknown unit", "GHz"]),
])
def test_unknown_unit_is_rejected_with_the_allowed_units(parse, text, words):
    """A wrong unit raises ValueError naming the unit and what was expected."""
    with pytest.raises(ValueError) as e:
        parse(text)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("parse, bad", [
    (parse_time_ns, "-5ns"), (parse_time_ns, -5), (parse_time_ns, -0.001),
    (parse_bytes, "-64B"), (parse_bytes, -1),
    (parse_rate_bps, "-100Gbps"), (parse_rate_bps, 0), (parse_rate_bps, "0Gbps"),
    (parse_freq_hz, 0), (parse_freq_hz, "-1GHz"),
])
def test_negative_or_zero_values_are_rejected(parse, bad):
    """Negative durations/sizes and non-positive rates/frequencies raise ValueError."""
    with pytest.raises(ValueError):
        parse(bad)


@pytest.mark.parametrize("parse", [parse_time_ns, parse_bytes, parse_rate_bps, parse_freq_hz])
@pytest.mark.parametrize("bad", [True, False, None, [1], {"v": 1}, "", "ns", "fast",
                                 "1.2.3ns", "5 5ns", "0x10B"])
def test_non_quantities_are_rejected(parse, bad):
    """Booleans, containers, empty strings and malformed numbers raise ValueError."""
    with pytest.raises(ValueError) as e:
        parse(bad)
    assert "expected" in str(e.value)


@pytest.mark.parametrize("bad", ["1.5B", 0.5, "0.1KiB", 1.25])
def test_fractional_bytes_are_rejected(bad):
    """A size must be a whole number of bytes."""
    with pytest.raises(ValueError, match="whole"):
        parse_bytes(bad)


@pytest.mark.parametrize("parse", [parse_time_ns, parse_rate_bps, parse_freq_hz])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_quantities_are_rejected(parse, bad):
    """NaN and infinity are not quantities: ValueError."""
    with pytest.raises(ValueError):
        parse(bad)


def test_infinite_size_raises_value_error():
    """An infinite size is rejected with ValueError like every other bad size."""
    with pytest.raises(ValueError):
        parse_bytes(math.inf)


@pytest.mark.parametrize("size, rate, ns", [
    (1500, 10e9, 1200.0), (64, 100e9, 5.12), (4096 + 26, 100e9 * 64 / 66, 340.065),
    (0, 40e9, 0.0), (1, 8e9, 1.0), (125, 1e9, 1000.0),
])
def test_tx_time_ns(size, rate, ns):
    """Serialisation time is bytes * 8 / rate, in ns."""
    assert tx_time_ns(size, rate) == pytest.approx(ns, rel=1e-12)


def test_tx_time_of_parsed_quantities():
    """4 KiB at 100 Gb/s is 327.68 ns."""
    assert tx_time_ns(parse_bytes("4KiB"), parse_rate_bps("100Gbps")) == \
        pytest.approx(327.68, rel=1e-12)


@pytest.mark.parametrize("ns, text", [
    (0.0, "0ns"), (300.0, "300ns"), (1500.0, "1.5us"), (2.5e6, "2.5ms"), (3e9, "3s"),
    (1234.0, "1.23us"),
])
def test_fmt_time(ns, text):
    """fmt_time picks the largest unit that keeps the number >= 1, 3 significant digits."""
    assert fmt_time(ns) == text


def test_unit_constants():
    """US, MS and S are in nanoseconds."""
    assert (US, MS, S) == (1e3, 1e6, 1e9)
