"""Plots declared in a scenario's ``plots:`` block (matplotlib's Agg backend; PNG unless a
plot's ``file`` names another format), drawn for a reader: axes named by quantity and unit,
byte sizes as ``64 B`` / ``4 KiB``, categories as grouped bars, y from zero, and the
published points of the paper beside the measured ones.

Kinds (``PlotSpec.kind``):

- ``line``: ``y`` against ``x``, one line per value of ``series``. An ``x`` whose values
  are not all numbers (names, booleans, None, or a mix) is drawn as ``bars`` instead: a
  line joining ``False`` and ``True`` would show a trend between categories.
- ``bars``: one group of bars per value of ``x`` (in sweep order), one bar per series.
- ``cdf``: a latency CDF per matching row. Results keep latency percentiles
  (``lat_p50_us``, ``lat_p90_us``, ``lat_p99_us``, ...), not whole distributions, so the
  CDF is a step through the percentiles the rows hold, and the plot says so.

Labels come from :func:`axis_label` (one table of metric and parameter names, with a rule
for the rest); byte ticks from :func:`format_bytes`.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any, get_args

from .scenario import Scenario, _num, matches
from .units import parse_bytes

# Metric or parameter name (a key path's last part) -> (quantity, unit); "" = no unit.
# Names not here are read by _derived_label's rule (unit from the suffix).
LABELS: dict[str, tuple[str, str]] = {
    "throughput_mops": ("throughput", "M ops/s"),
    "throughput_mtxns": ("throughput", "M txns/s"),
    "throughput_mtxns_per_node": ("throughput per machine", "M txns/s"),
    "msg_rate_mpps": ("message rate", "M packets/s"),
    "bandwidth_gbps": ("bandwidth", "Gb/s"),
    "background_gbps": ("background flows' goodput", "Gb/s"),
    "pipeline_bound_gbps": ("binomial pipeline bound", "Gb/s"),
    "lat_mean_us": ("mean latency", "us"),
    "lat_excess_us": ("latency minus wire time", "us"),
    "lat_log_us": ("logging-phase latency", "us"),
    "lat_exec_us": ("execution-phase latency", "us"),
    "lat_commit_us": ("commit-phase latency", "us"),
    "lat_validate_us": ("validation-phase latency", "us"),
    "lat_read_us": ("read-stage latency", "us"),
    "lat_lock_us": ("lock-stage latency", "us"),
    "lat_release_us": ("release-stage latency", "us"),
    "lat_renew_us": ("renew-stage latency", "us"),
    "completion_ms": ("completion time", "ms"),
    "total_ms": ("total time", "ms"),
    "skew_ms": ("completion skew", "ms"),
    "pause_time_us": ("PFC pause time", "us"),
    "victim_slowdown": ("victim slowdown", "x"),
    "abort_rate": ("abort rate", "fraction"),
    "abort_rate_version_slot": ("aborts from version-slot overflow", "fraction"),
    "cpu": ("CPU busy share", "fraction"),
    "cpu_util": ("worker CPU busy share", "fraction"),
    "nic_pu_util_max": ("busiest NIC's processing units, busy share", "fraction"),
    "qpc_miss_rate": ("QP-context cache miss rate", "fraction"),
    "round_trips_per_txn": ("round trips per transaction", ""),
    # parameters
    "payload": ("payload", "B"),
    "message": ("message size", "B"),
    "block": ("block size", "B"),
    "rdma_mtu": ("RDMA MTU", "B"),
    "inline_max": ("largest inlined payload", "B"),
    "nodes": ("machines", ""),
    "threads": ("threads per machine", ""),
    "coroutines": ("coroutines per thread", ""),
    "group_size": ("group size (root included)", "nodes"),
    "background_flows": ("background flows", ""),
    "senders": ("senders", ""),
    "step": ("optimisation step", ""),
    "ycsb_compute": ("computation per transaction", "ns"),
    "ycsb_hot_probability": ("share of operations on the hot records", ""),
    "preset": ("system", ""),
    "verb": ("verb", ""),
    "method": ("method", ""),
    "algorithm": ("algorithm", ""),
    "doorbell_batch": ("doorbell batch", "WQEs"),
    "qps_per_peer": ("QPs per peer per thread", ""),
    "dcqcn": ("DCQCN", ""),
    "shared_context": ("shared verbs context", ""),
    "transport": ("transport", ""),
    "benchmark": ("benchmark", ""),
    "execution": ("execution phase", ""),
    "index_cache": ("index cache", ""),
    "lock": ("validation (lock)", ""),
    "commit": ("commit phase", ""),
    "log": ("logging phase", ""),
    "passive_ack": ("passive ACK", ""),
    "primitive": ("primitive", ""),
    "op": ("operation", ""),
}

# Name suffix -> unit, for names the table does not hold (longest first).
_SUFFIX_UNITS = [("_mtxns", "M txns/s"), ("_mops", "M ops/s"), ("_mpps", "M packets/s"),
                 ("_gbps", "Gb/s"), ("_us", "us"), ("_ms", "ms"), ("_ns", "ns"),
                 ("_bytes", "B"), ("_rate", "fraction"), ("_util", "fraction"),
                 ("_fraction", "fraction")]
_PERCENTILE = re.compile(r"^lat_p(\d+)_us$")
_PER_CALL = re.compile(r"^lat_(\w+)_call_us$")


def axis_label(name: str, byte_param: bool = False) -> str:
    """The axis label of column ``name``: ``"quantity [unit]"`` (``"quantity"`` when it has
    no unit). ``name`` is a metric (``lat_p99_us`` -> ``p99 latency [us]``) or a key path
    (``workload.payload`` -> ``payload [B]``, labelled by its last part);
    ``byte_param`` marks a parameter whose values are byte sizes (unit ``B``). Names
    outside :data:`LABELS` are read by rule: a known unit suffix (``_us``, ``_gbps``,
    ...) gives the unit, ``_per_node`` reads "per machine", underscores become spaces."""
    last = name.rsplit(".", 1)[-1]
    q, unit = LABELS.get(last) or _derived_label(last)
    if byte_param and not unit:
        unit = "B"
    return f"{q} [{unit}]" if unit else q


def _derived_label(name: str) -> tuple[str, str]:
    m = _PERCENTILE.match(name)
    if m:
        return f"p{m.group(1)} latency", "us"
    m = _PER_CALL.match(name)
    if m:
        return f"{m.group(1)} stage, mean per call", "us"
    per_node = name.endswith("_per_node")
    base = name[:-len("_per_node")] if per_node else name
    unit = ""
    for suffix, u in _SUFFIX_UNITS:
        if base.endswith(suffix) and len(base) > len(suffix):
            base, unit = base[:-len(suffix)], u
            break
    q = base.replace("_", " ").strip() or name
    return (q + " per machine" if per_node else q), unit


def format_bytes(v: float) -> str:
    """``v`` bytes as a tick label with a binary prefix: ``64 B``, ``4 KiB``, ``1.5 MiB``
    (at most two decimals; negative and non-finite values as numbers)."""
    if not math.isfinite(v) or v < 0:
        return f"{v:g}"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale:
            return f"{round(v / scale, 2):g} {unit}"
    return f"{round(v, 2):g} B"


def make_plots(sc: Scenario, rows: list[dict[str, Any]], out: Path) -> list[str]:
    """Draw every plot of ``sc`` from ``rows`` into ``out``; return the file names.

    A plot whose ``where`` matches no row (e.g. a series a ``--size`` leaves out of the
    sweep) is not drawn: an empty figure would read as a result. A ``logx``/``logy`` axis
    whose values are all zero, negative or NaN (e.g. no operation completed in a short
    window) is drawn linear, with a warning on stderr: matplotlib cannot place log ticks
    there, and one plot must not lose the run's results. Swept values written with units
    (``64KiB``, ``30us``) are placed and ordered by their number of bytes or ns; an x
    column that is not all numbers is drawn as bars, its categories in the order the
    rows have them (sweep order). A plot that fails all the same is left out with a
    warning on stderr: the results matter more than a figure."""
    if not sc.plots:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    for i, p in enumerate(sc.plots):
        try:
            fig = figure(plt, sc, i, rows)
            if fig is None:
                continue
            try:
                name = p.file or (f"{p.y or 'latency_cdf'}_vs_"
                                  f"{(p.x or 'latency').split('.')[-1]}_{i}.png")
                fig.savefig(out / name, dpi=110)
            finally:
                plt.close(fig)
            files.append(name)
        except Exception as e:  # noqa: BLE001 - a plot must never cost a run its results
            plt.close("all")
            print(f"rnicsim: warning: plots[{i}] not drawn ({type(e).__name__}: {e}); "
                  f"the results are written", file=sys.stderr, flush=True)
    return files


def figure(plt, sc: Scenario, i: int, rows: list[dict[str, Any]]):
    """The matplotlib figure of plot ``sc.plots[i]`` drawn from ``rows`` (the caller saves
    and closes it), or None when no row has what the plot draws."""
    p = sc.plots[i]
    need = [p.x, p.y] if p.kind != "cdf" else []
    sel = [r for r in rows if matches(p.where, r) and all(k in r for k in need)]
    if p.kind == "cdf":
        sel = [r for r in sel if _percentiles(r)]
    if not sel:
        return None
    return _draw(plt, sc, i, p, sel)


def _series_keys(p) -> list[str]:
    return [p.series] if isinstance(p.series, str) else list(p.series or [])


def _value_text(v: Any, byte_axis: bool = False) -> str:
    if byte_axis and _is_number(_num(v)):
        return format_bytes(_num(v))
    return "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _groups(p, sel: list[dict[str, Any]], sc: Scenario) -> dict[str, list[dict]]:
    """Rows by series label (``value / value`` of the series keys), in row order."""
    keys = _series_keys(p)
    groups: dict[str, list] = {}
    for r in sel:
        groups.setdefault(_series_name(sc, keys, r) or axis_label(p.y or ""), []).append(r)
    return groups


def _series_name(sc: Scenario, keys: list[str], r: dict[str, Any]) -> str:
    """Row ``r``'s values of the series ``keys``, ``value / value`` (bytes as ``4 KiB``)."""
    return " / ".join(_value_text(r.get(k), is_byte_key(sc, k)) for k in keys)


def _draw(plt, sc: Scenario, i: int, p, sel: list[dict[str, Any]]):
    """The figure of plot ``p`` (``sc.plots[i]``) of the rows ``sel``."""
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    try:
        groups = _groups(p, sel, sc)
        colours: dict[str, Any] = {}
        cats = None            # the categories of a bar plot, by position
        fixed_x = False        # x ticks are the swept values (kept as they are)
        if p.kind == "cdf":
            _draw_cdf(ax, i, p, sel, sc, colours)
        else:
            numeric = p.kind == "line" and all(_is_number(_num(r[p.x])) for r in sel)
            if numeric:
                fixed_x = _draw_lines(ax, sc, i, p, groups, colours)
            else:
                if p.logx:
                    _log_ok([_num(r[p.x]) for r in sel], p.x, i, "x")   # warns: categories
                cats = _draw_bars(ax, sc, p, groups, colours)
            if p.logy and _log_ok([r[p.y] for r in sel], p.y, i, "y"):
                ax.set_yscale("log")
            ax.set_ylabel(axis_label(p.y))
            for ref in p.reference:
                _draw_reference(ax, p, groups, ref, colours, cats)
        notes_at = _draw_published(ax, p, groups, colours, cats)
        # from zero also when every value is 0 (matplotlib centres a flat line on it)
        ys = [v for v in [r.get(p.y) for r in sel] + [pt.y for pt in p.published]
              if _is_number(v) and math.isfinite(v)] if p.kind != "cdf" else []
        if p.y_from_zero and ax.get_yscale() == "linear" and (
                ax.get_ylim()[0] > 0 or (ys and min(ys) >= 0 and ax.get_ylim()[0] < 0)):
            ax.set_ylim(bottom=0)
        if p.published and ax.get_yscale() == "linear" and p.kind != "cdf":
            # room above the highest published point for its label
            lo, hi = ax.get_ylim()
            top = max(pt.y for pt in p.published)
            if top + 0.08 * (hi - lo) > hi:
                ax.set_ylim(top=top + 0.08 * (hi - lo))
        for a in ([ax.yaxis] if fixed_x else [ax.xaxis, ax.yaxis]):
            if a.get_scale() == "log":
                _plain_log(a)
        _annotate(ax, notes_at)
        ax.set_title(p.title or sc.description or sc.name, fontsize=11)
        notes = []
        if p.kind == "cdf":
            notes.append("CDF steps through the percentiles the results keep (p50, p90, "
                         "p99, ...), not whole distributions")
        if sc.run.size != "full":
            notes.append(f"run size: {sc.run.size}")
        if notes:
            fig.text(0.99, 0.01, "; ".join(notes), ha="right", va="bottom", fontsize=7,
                     color="0.35")
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
        handles, labels = ax.get_legend_handles_labels()
        rect = (0, 0.03 if notes else 0, 1, 1)
        if handles:
            keys = _series_keys(p)
            style = dict(title=" / ".join(axis_label(k).split(" [")[0] for k in keys) or None,
                         fontsize=8, title_fontsize=8)
            legend = ax.legend(**style)
            fig.tight_layout(rect=rect)
            if _covers(fig, ax, legend):
                legend.remove()
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                          **style)
        fig.tight_layout(rect=rect)
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _draw_lines(ax, sc: Scenario, i: int, p, groups, colours) -> bool:
    """One line per series; True when the x ticks are set to the swept values."""
    from matplotlib.ticker import NullLocator

    def xv(r):
        return _num(r[p.x])

    xs_all = sorted({xv(r) for rs in groups.values() for r in rs})
    n = len(_SERIES_MARKERS)              # = the colours of matplotlib's default cycle
    for j, (name, rs) in enumerate(groups.items()):
        rs = sorted(rs, key=xv)
        # a marker per series: lines that coincide, and grey prints, stay told apart;
        # above the published markers: a measured point on its published one stays seen.
        # Past the colour cycle a series repeats a colour: another dash and marker then.
        (line,) = ax.plot([xv(r) for r in rs], [r[p.y] for r in rs],
                          marker=_SERIES_MARKERS[(j + j // n) % n], ms=4.5,
                          ls=_SERIES_DASHES[j // n % len(_SERIES_DASHES)],
                          label=name if p.series else None, zorder=6)
        colours[name] = line.get_color()
    if p.logx and _log_ok(xs_all, p.x, i, "x"):
        ax.set_xscale("log", base=2)
    byte_axis = is_byte_key(sc, p.x)
    # the swept values as ticks: a reader finds the measured points on the axis
    ticks = [x for x in xs_all if not p.logx or x > 0]
    if byte_axis or p.logx or all(float(x).is_integer() for x in ticks):
        if 0 < len(ticks) <= 14:
            labels = [format_bytes(x) if byte_axis else f"{x:g}" for x in ticks]
            # slanted when they would run into each other: many ticks, or long labels
            # (e.g. 32000 to 256000 ns on a log axis, a quarter of its width)
            crowded = len(ticks) > 7 or sum(len(t) for t in labels) > 24
            ax.set_xticks(ticks)
            ax.set_xticklabels(labels, rotation=30 if crowded else 0)
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel(axis_label(p.x, byte_axis))
            return True
    ax.set_xlabel(axis_label(p.x, byte_axis))
    return False


def _categories(p, groups) -> list[Any]:
    cats: list[Any] = []
    for rs in groups.values():
        for r in rs:
            if not any(_same(r[p.x], c) for c in cats):
                cats.append(r[p.x])
    return cats


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and _num(a) == _num(b)


def _draw_bars(ax, sc: Scenario, p, groups, colours) -> list[Any]:
    """Grouped bars: category c at position c's index, series j offset within it; return
    the categories by position."""
    cats = _categories(p, groups)
    n = len(groups)
    width = 0.8 / n
    byte_axis = is_byte_key(sc, p.x)
    for j, (name, rs) in enumerate(groups.items()):
        pos, hs = [], []
        for r in rs:
            k = next(c for c, v in enumerate(cats) if _same(r[p.x], v))
            pos.append(k + (j - (n - 1) / 2) * width)
            hs.append(r[p.y])
        bars = ax.bar(pos, hs, width=width * 0.95, label=name if p.series else None)
        colours[name] = bars.patches[0].get_facecolor() if bars.patches else None
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([_value_text(c, byte_axis) for c in cats])
    ax.set_xlabel(axis_label(p.x, byte_axis))
    return cats


def _draw_reference(ax, p, groups, col: str, colours, cats: list[Any] | None) -> None:
    """Column ``col`` drawn dashed (a bound or an ideal the measured series are read
    against): one black line when every series has the same values, else one line per
    series in its colour; over bars (``cats``), a dash across each category. One legend
    entry, the column's quantity."""
    lines: dict[str, dict[Any, float]] = {}
    for name, rs in groups.items():
        pts: dict[Any, float] = {}
        for r in rs:
            if _is_number(r.get(col)):
                pts.setdefault(_num(r[p.x]) if cats is None else _value_text(r[p.x]), r[col])
        if pts:
            lines[name] = pts
    if not lines:
        return
    shared = all(v == next(iter(lines.values())) for v in lines.values())
    label = axis_label(col).split(" [")[0]
    if not shared:                 # the legend entry in black: it stands for every colour
        ax.plot([], [], ls="--", color="black", lw=1.2, label=label)
        label = None
    for name, pts in (list(lines.items())[:1] if shared else lines.items()):
        colour = "black" if shared else colours.get(name, "black")
        if cats is None:
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], ls="--", color=colour, lw=1.2, label=label,
                    zorder=4)
        else:
            for k, c in enumerate(cats):
                if _value_text(c) in pts:
                    ax.hlines(pts[_value_text(c)], k - 0.45, k + 0.45, colors=colour,
                              linestyles="--", label=label, zorder=4)
        label = None


def _percentiles(r: dict[str, Any]) -> list[tuple[float, float]]:
    """(latency [us], fraction) for every ``lat_pNN_us`` column of row ``r`` with a number,
    by fraction (``p50`` -> 0.5, ``p999`` -> 0.999)."""
    out = []
    for k, v in r.items():
        m = _PERCENTILE.match(k)
        if m and _is_number(v) and math.isfinite(v):
            digits = m.group(1)
            out.append((float(v), int(digits) / 10 ** len(digits)))
    return sorted(out, key=lambda t: t[1])


def _draw_cdf(ax, i: int, p, sel, sc: Scenario, colours) -> None:
    """One step per row: 0 below its p50, then each percentile's fraction from its
    latency on (the distribution between two percentiles is not known: the step is the
    least the fraction can be there)."""
    keys = _series_keys(p)
    for r in sel:
        pts = _percentiles(r)
        name = _series_name(sc, keys, r) or "latency"
        xs = [pts[0][0]] + [x for x, _ in pts]
        ys = [0.0] + [f for _, f in pts]
        (line,) = ax.step(xs, ys, where="post", label=name if keys else None)
        ax.plot([x for x, _ in pts], [f for _, f in pts], "o", ms=4, color=line.get_color())
        colours.setdefault(name, line.get_color())
    lats = [x for r in sel for x, _ in _percentiles(r)]
    if p.logx and _log_ok(lats, "latency", i, "x"):
        ax.set_xscale("log")
    ax.set_xlabel("latency [us]")
    ax.set_ylabel("fraction of operations at most this latency")
    ax.set_ylim(0, 1.02)


_BOUND_MARKERS = {None: "*", "upper": "v", "lower": "^"}
_SERIES_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "h")
_SERIES_DASHES = ("-", "--", ":")


def _draw_published(ax, p, groups, colours, cats: list[Any] | None) -> list:
    """The plot's published points: a black-edged marker in the colour of the series it
    belongs to (``*`` a value, ``v`` an upper bound, ``^`` a lower bound), a horizontal
    segment for an x range, a dotted level across the plot without x; one legend entry
    per source, ``published (SOURCE)``. Returns (x, y, text) of each point's label (or
    claim id), for :func:`_annotate`. A claim id that several unlabelled points of one
    source share (a table's column drawn on one plot) is named once, in that source's
    legend entry (``published (SOURCE; R8)``), not beside each point."""
    shared = _shared_claims(p.published)
    seen: set[str] = set()
    notes: list[tuple[float, float, str]] = []
    for pt in p.published:
        colour = _series_colour(p, pt, groups, colours)
        marker = _BOUND_MARKERS[pt.bound]
        style = dict(marker=marker, ms=12 if marker == "*" else 9, mec="black", mew=1.0,
                     ls="none", zorder=5)
        ids = shared.get(pt.source, [])
        legend = f"published ({pt.source}{'; ' + ', '.join(ids) if ids else ''})"
        if legend not in seen:            # one entry per source, in a neutral colour
            seen.add(legend)
            if pt.x is None:
                ax.plot([], [], label=legend, ls=":", color="0.25", lw=1.5)
            else:
                ax.plot([], [], label=legend, mfc="white", **dict(style, marker="*", ms=12))
        text = pt.label or (pt.claim if pt.claim not in ids else "") or ""
        if pt.x is None:
            ax.axhline(pt.y, ls=":", color="0.25" if colour == "white" else colour, lw=1.5,
                       zorder=4)
            if text:
                notes.append((None, pt.y, text))
            continue
        if isinstance(pt.x, list):
            x0, x1 = (_num(v) for v in pt.x)
            ax.plot([x0, x1], [pt.y, pt.y], color="0.25" if colour == "white" else colour,
                    lw=2.5, zorder=4, solid_capstyle="butt")
            xs = [x0, x1]
        elif cats is not None:
            k = next((c for c, v in enumerate(cats) if _value_text(v) == _value_text(pt.x)),
                     None)
            if k is None:
                continue
            xs = [k + _bar_offset(p, pt, groups)]
        else:
            xs = [_num(pt.x)]
        ax.plot(xs, [pt.y] * len(xs), mfc=colour, **style)
        if text:
            notes.append((xs[-1], pt.y, text))
    return notes


def _covers(fig, ax, legend) -> bool:
    """True when ``legend`` lies over a bar, a series line or marker, or a point's text of
    ``ax``: with every corner full, matplotlib's ``best`` place still covers data, and it
    does not weigh texts at all."""
    r = fig.canvas.get_renderer()
    fig.draw_without_rendering()                 # places a ``best`` legend
    box = legend.get_window_extent(r)
    if any(box.overlaps(a.get_window_extent(r)) for a in [*ax.texts, *ax.patches]):
        return True
    for line in ax.get_lines():         # series and published points (levels have no marker)
        if line.get_marker() in (None, "None", "", " ") or not len(line.get_xydata()):
            continue
        if line.get_transform().transform_path(line.get_path()).intersects_bbox(box, False):
            return True
    return False


def _shared_claims(points) -> dict[str, list[str]]:
    """Source -> the claim ids (in order of first use) that two or more of its unlabelled
    points carry."""
    count: dict[tuple[str, str], int] = {}
    for pt in points:
        if pt.claim and not pt.label:
            count[(pt.source, pt.claim)] = count.get((pt.source, pt.claim), 0) + 1
    out: dict[str, list[str]] = {}
    for (source, claim), n in count.items():
        if n > 1:
            out.setdefault(source, []).append(claim)
    return out


def _annotate(ax, notes: list[tuple[float | None, float, str]]) -> None:
    """Each published point's text beside it, once the limits are final: to its right,
    or to its left in the right quarter of the axes (so it stays inside), moved down a
    line while it would overlap one placed before; a level's (x None) at the left edge."""
    # transData maps through the view limits as they stand; matplotlib applies a pending
    # autoscale (points drawn since the limits were last read) only when they are read
    ax.get_xlim(), ax.get_ylim()
    placed: list[tuple[float, float, float]] = []      # (left, right, bottom) [axes]
    line, char = 0.035, 0.0085                          # one text line; one character
    for x, y, text in notes:
        if x is None:
            fx, fy = 0.0, ax.transAxes.inverted().transform(
                ax.transData.transform((ax.get_xlim()[0], y)))[1]
            right = False
        else:
            fx, fy = ax.transAxes.inverted().transform(ax.transData.transform((x, y)))
            right = fx > 0.75
        width = len(text) * char
        x0, x1 = (fx - 0.012 - width, fx) if right else (fx, fx + 0.012 + width)
        dy = 0.008
        while any(x0 < b1 and b0 < x1 and abs(fy + dy - b) < line for b0, b1, b in placed):
            dy -= line
        placed.append((x0, x1, fy + dy))
        ax.annotate(text, (fx, fy), xycoords="axes fraction",
                    xytext=((-0.012 if right else 0.012) + fx, fy + dy),
                    textcoords="axes fraction", ha="right" if right else "left",
                    fontsize=7)


def _plain_log(axis) -> None:
    """Ticks of a log axis as plain numbers at 1, 2, 5 x 10^n (``200``, not ``2x10^2``)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _matching_groups(p, pt, groups) -> list[str]:
    return [name for name, rs in groups.items() if matches(pt.series, rs[0])]


def _series_colour(p, pt, groups, colours) -> Any:
    """The colour of the one measured series ``pt.series`` selects; white when it selects
    none or several (the marker's black edge still shows it)."""
    names = _matching_groups(p, pt, groups) if pt.series else []
    if len(names) == 1 and colours.get(names[0]) is not None:
        return colours[names[0]]
    return "white"


def _bar_offset(p, pt, groups) -> float:
    names = list(groups)
    hit = _matching_groups(p, pt, groups) if pt.series else []
    if len(hit) != 1:
        return 0.0
    n = len(names)
    return (names.index(hit[0]) - (n - 1) / 2) * 0.8 / n


def is_byte_key(sc: Scenario, key: str | None) -> bool:
    """True when ``key`` is a key path of ``sc`` whose field holds a byte size (declared
    with the schema's ``Size`` type, e.g. ``workload.payload``)."""
    if not key or "." not in key:
        return False
    obj: Any = sc
    parts = key.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part, None)
        if obj is None or not hasattr(type(obj), "model_fields"):
            return False
    f = type(obj).model_fields.get(parts[-1])
    return f is not None and (_holds_bytes(f.metadata) or _holds_bytes([f.annotation]))


def _holds_bytes(items: list[Any]) -> bool:
    """True when one of ``items`` (validators or annotations, e.g. ``Size | None``) parses
    its value with :func:`parse_bytes`."""
    for it in items:
        if getattr(it, "func", None) is parse_bytes:
            return True
        if _holds_bytes(list(getattr(it, "__metadata__", ())) + list(get_args(it))):
            return True
    return False


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _log_ok(values: list[Any], col: str, i: int, axis: str) -> bool:
    """False, with a warning that ``plots[i]`` draws that axis linear, when the values
    (of column ``col``) are not all numbers (categories have no log scale) or none is
    positive (zero, negative or NaN: nothing a log axis can show)."""
    if not all(_is_number(v) for v in values):
        why = "values that are not numbers"
    elif not any(v > 0 for v in values):
        why = "no positive value"
    else:
        return True
    print(f"rnicsim: warning: plots[{i}].log{axis}: {why} of {col!r} to show on a log "
          f"axis; drawn linear", file=sys.stderr, flush=True)
    return False
