"""Units: one time unit (nanoseconds, float), byte sizes and rates.

Contract:
- Time is a float number of nanoseconds everywhere in the simulator.
- Sizes are integers of bytes.
- Rates are floats of bits per second; :func:`tx_time_ns` is the one helper that turns a
  size at a rate into a time, so every serialisation delay is computed the same way.
- Quantities in YAML are unit strings (``"100Gbps"``, ``"300ns"``, ``"4KiB"``); the
  ``parse_*`` functions accept them (and plain numbers, taken in the base unit) and raise
  :class:`ValueError` with a message saying what was expected.
"""
from __future__ import annotations

import math
import re

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_TIME = {"ps": 1e-3, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_SIZE = {
    "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
    "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "K": 1024, "M": 1024**2, "G": 1024**3,
}
_RATE = {"bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12,
         "GB/s": 8e9, "MB/s": 8e6}
_FREQ = {"Hz": 1.0, "KHz": 1e3, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}


def _parse(text: object, table: dict[str, float], what: str, example: str) -> float:
    v = _parse_any(text, table, what, example)
    if not math.isfinite(v):
        raise ValueError(f"expected a finite {what} such as {example!r}, got {text!r}")
    return v


def _parse_any(text: object, table: dict[str, float], what: str, example: str) -> float:
    if isinstance(text, bool):
        raise ValueError(f"expected a {what} such as {example!r}, got {text!r}")
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"expected a {what} such as {example!r}, got {text!r}")
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]+)?", text.strip().replace("_", ""))
    if not m:
        raise ValueError(f"expected a {what} such as {example!r}, got {text!r}")
    value, unit = float(m.group(1)), m.group(2)
    if unit is None:
        return value
    if unit not in table:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r}; expected a {what} in one of {', '.join(table)}")
    return value * table[unit]


def parse_time_ns(text: object) -> float:
    """Parse a duration (``"300ns"``, ``"1.5us"``, ``"2ms"``; a bare number is ns) to ns."""
    v = _parse(text, _TIME, "duration", "300ns")
    if v < 0:
        raise ValueError(f"expected a non-negative duration, got {text!r}")
    return v


def parse_bytes(text: object) -> int:
    """Parse a size (``"64B"``, ``"4KiB"``, ``"2MiB"``; a bare number is bytes) to bytes."""
    v = _parse(text, _SIZE, "size", "4KiB")
    if v < 0 or v != int(v):
        raise ValueError(f"expected a whole non-negative number of bytes, got {text!r}")
    return int(v)


def parse_rate_bps(text: object) -> float:
    """Parse a rate (``"100Gbps"``, ``"12.5GB/s"``; a bare number is bit/s) to bit/s."""
    v = _parse(text, _RATE, "rate", "100Gbps")
    if v <= 0:
        raise ValueError(f"expected a positive rate, got {text!r}")
    return v


def parse_freq_hz(text: object) -> float:
    """Parse a frequency (``"2.2GHz"``) to Hz."""
    v = _parse(text, _FREQ, "frequency", "2.2GHz")
    if v <= 0:
        raise ValueError(f"expected a positive frequency, got {text!r}")
    return v


def tx_time_ns(size_bytes: float, rate_bps: float) -> float:
    """Serialisation time [ns] of ``size_bytes`` [B] at ``rate_bps`` [bit/s]."""
    return size_bytes * 8e9 / rate_bps


def fmt_time(ns: float) -> str:
    """Human-readable duration for messages and reports."""
    if ns >= 1e9:
        return f"{ns / 1e9:.3g}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g}us"
    return f"{ns:.3g}ns"


US = 1e3
MS = 1e6
S = 1e9
