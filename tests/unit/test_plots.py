"""Plots for readers (rnicsim.plots): labels, byte ticks, bars for categories, y from zero,
the percentile CDF, published points, and the schema's checks of published points."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from rnicsim.errors import InputError  # noqa: E402
from rnicsim.plots import axis_label, figure, format_bytes, is_byte_key, make_plots  # noqa: E402
from rnicsim.scenario import load_scenario  # noqa: E402

HEAD = """\
version: 1
name: tiny
description: a tiny scenario
cluster: {nodes: 2, nic: {profile: cx4-edr}, threads: 1}
workload: {kind: microbench, verb: read, payload: 64B}
run: {seed: 3, warmup: 5us, measure: 5us}
sweep: {workload.verb: [read, write], workload.payload: [8, 64, 4KiB], workload.shared_context: [false, true]}
expected:
  - {claim: D1, role: calibration, kind: value, metric: throughput_mops, published: 130}
  - {claim: D2, role: calibration, kind: value, metric: throughput_mops, where: {workload.verb: write}, published: 100}
  - {claim: D5, role: validation, kind: ratio, metric: throughput_mops, numerator: {workload.verb: read},
     denominator: {workload.verb: write}, over: workload.payload, published: 1.6}
"""


def scenario(tmp_path, plots: str, overrides=None):
    p = tmp_path / "s.yaml"
    p.write_text(HEAD + "plots:\n" + plots)
    return load_scenario(p, overrides)


def rows_of(sc, tput=lambda verb, payload, shared: 90.0 + (verb == "write") * 5):
    """One row per point: throughput from ``tput``, latency percentiles 1/2/4 us."""
    out = []
    for verb in ("read", "write"):
        for payload in (8, 64, "4KiB"):
            for shared in (False, True):
                out.append({"workload.verb": verb, "workload.payload": payload,
                            "workload.shared_context": shared,
                            "throughput_mops": tput(verb, payload, shared),
                            "lat_p50_us": 1.0, "lat_p90_us": 2.0, "lat_p99_us": 4.0})
    return out


def draw(sc, i=0, rows=None):
    fig = figure(plt, sc, i, rows if rows is not None else rows_of(sc))
    assert fig is not None
    return fig, fig.axes[0]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize("name, byte_param, label", [
    ("throughput_mops", False, "throughput [M ops/s]"),
    ("lat_p99_us", False, "p99 latency [us]"),
    ("lat_p999_us", False, "p999 latency [us]"),
    ("lat_lock_us", False, "lock-stage latency [us]"),
    ("lat_lock_call_us", False, "lock stage, mean per call [us]"),
    ("workload.payload", False, "payload [B]"),
    ("throughput_mtxns_per_node", False, "throughput per machine [M txns/s]"),
    ("completion_ms", False, "completion time [ms]"),
    ("widget_gbps", False, "widget [Gb/s]"),
    ("widgets_per_node", False, "widgets per machine"),
    ("spare_rate", False, "spare [fraction]"),
    ("workload.region", True, "region [B]"),
    ("workload.frobs", False, "frobs"),
])
def test_axis_labels_give_quantity_and_unit(name, byte_param, label):
    """The table names known columns; the rule reads a unit suffix; a byte parameter gets B."""
    assert axis_label(name, byte_param) == label


@pytest.mark.parametrize("v, text", [(0, "0 B"), (64, "64 B"), (1023, "1023 B"),
                                     (1024, "1 KiB"), (1536, "1.5 KiB"), (4096, "4 KiB"),
                                     (1 << 20, "1 MiB"), (256 << 20, "256 MiB"),
                                     (3 << 30, "3 GiB"),
                                     (1000 << 10, "1000 KiB"), (1100, "1.07 KiB")])
def test_byte_ticks_use_binary_prefixes(v, text):
    assert format_bytes(v) == text


def test_byte_keys_are_found_from_the_schema(tmp_path):
    """Fields typed as byte sizes (also ``Size | None``) are byte axes; counts are not."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops}\n")
    assert [is_byte_key(sc, k) for k in ("workload.payload", "workload.inline_max",
                                         "workload.coroutines", "cluster.nodes",
                                         "throughput_mops")] == [True, True, False, False,
                                                                 False]


def test_a_byte_axis_has_byte_ticks_at_the_swept_values_and_y_from_zero(tmp_path):
    """Payloads 8, 64, 4KiB are ticks '8 B', '64 B', '4 KiB' on a log2 axis; y values of
    90-95 are drawn from 0 (a 5% difference must not look large)."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, series: workload.verb,"
                            " logx: true, where: {workload.shared_context: false}}\n")
    _fig, ax = draw(sc)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8 B", "64 B", "4 KiB"]
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0}
    assert list(ax.get_xticks()) == [8, 64, 4096]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "payload [B]" and ax.get_ylabel() == "throughput [M ops/s]"
    assert ax.get_ylim()[0] == 0
    assert [line.get_label() for line in ax.get_lines()] == ["read", "write"]
    assert ax.get_title() == "a tiny scenario"


def test_long_tick_labels_close_together_are_slanted(tmp_path):
    """Four ticks from 32 KiB to 256 KiB take a quarter of a log axis: their labels (26
    characters) would run into each other upright, so they are drawn at 30 degrees."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, logx: true,"
                            " where: {workload.verb: read, workload.shared_context: false}}\n")
    rows = [{"workload.verb": "read", "workload.payload": b, "workload.shared_context": False,
             "throughput_mops": 90.0} for b in (32768, 65536, 131072, 262144)]
    _fig, ax = draw(sc, rows=rows)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32 KiB", "64 KiB", "128 KiB",
                                                            "256 KiB"]
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {30}


def test_series_past_the_colour_cycle_are_dashed_with_another_marker(tmp_path):
    """12 series, 10 colours: series 10 and 11 repeat the colours of 0 and 1, dashed, with
    the markers of 1 and 2."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops,"
                            " series: [workload.verb, workload.shared_context]}\n")
    rows = [{"workload.verb": f"v{v}", "workload.shared_context": s, "workload.payload": x,
             "throughput_mops": 1.0} for v in range(6) for s in (False, True) for x in (8, 64)]
    _fig, ax = draw(sc, rows=rows)
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    assert [ln.get_linestyle() for ln in lines] == ["-"] * 10 + ["--"] * 2
    assert [ln.get_marker() for ln in lines] == list("osD^vPX<>h") + ["s", "D"]
    assert [ln.get_color() for ln in lines[10:]] == [ln.get_color() for ln in lines[:2]]


def test_a_y_of_only_zeros_starts_at_zero(tmp_path):
    """No operation aborted: the flat line at 0 sits on the x axis, not mid-plot."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops,"
                            " where: {workload.verb: read, workload.shared_context: false}}\n")
    _fig, ax = draw(sc, rows=rows_of(sc, lambda v, p, s: 0.0))
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 0


def test_y_from_zero_can_be_turned_off(tmp_path):
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, y_from_zero: false,"
                            " where: {workload.shared_context: false}}\n")
    _fig, ax = draw(sc)
    assert ax.get_ylim()[0] > 80


def test_a_boolean_x_is_drawn_as_grouped_bars_not_a_line(tmp_path):
    """x = shared_context (False/True), two verbs: 2 categories x 2 series = 4 bars at
    category positions -0.2/+0.2 and 0.8/1.2, ticks 'false'/'true', no line."""
    sc = scenario(tmp_path, "  - {x: workload.shared_context, y: throughput_mops,"
                            " series: workload.verb, where: {workload.payload: 64}}\n")
    _fig, ax = draw(sc, rows=rows_of(sc, lambda v, p, s: 50.0 if s else 100.0))
    bars = ax.patches
    assert [round(b.get_x() + b.get_width() / 2, 6) for b in bars] == [-0.2, 0.8, 0.2, 1.2]
    assert [b.get_height() for b in bars] == [100.0, 50.0, 100.0, 50.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["false", "true"]
    assert [line for line in ax.get_lines() if len(line.get_xdata())] == []
    assert ax.get_ylim()[0] == 0


def test_a_byte_axis_drawn_as_bars_names_its_categories_in_bytes(tmp_path):
    sc = scenario(tmp_path, "  - {kind: bars, x: workload.payload, y: throughput_mops,"
                            " where: {workload.verb: read, workload.shared_context: false}}\n")
    _fig, ax = draw(sc)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8 B", "64 B", "4 KiB"]
    assert len(ax.patches) == 3


def test_cdf_steps_through_the_percentiles_and_says_so(tmp_path):
    """p50 1 us, p90 2 us, p99 4 us: a step 0 -> 0.5 at 1 us, 0.9 at 2 us, 0.99 at 4 us."""
    sc = scenario(tmp_path, "  - {kind: cdf, series: workload.verb, where:"
                            " {workload.payload: 64, workload.shared_context: false}}\n")
    fig, ax = draw(sc)
    steps = [ln for ln in ax.get_lines() if ln.get_drawstyle() == "steps-post"]
    assert [ln.get_label() for ln in steps] == ["read", "write"]
    assert list(steps[0].get_xdata()) == [1.0, 1.0, 2.0, 4.0]
    assert list(steps[0].get_ydata()) == [0.0, 0.5, 0.9, 0.99]
    assert ax.get_xlabel() == "latency [us]"
    assert any("percentiles the results keep" in t.get_text() for t in fig.texts)


def test_published_points_are_drawn_with_a_legend_entry_per_source(tmp_path):
    """A point at 64 B, a range 8-64 B and a level: each at its place, in the colour of
    its series; the legend names 'published (DrTM+H fig. 5a)' once."""
    sc = scenario(tmp_path, """\
  - x: workload.payload
    y: throughput_mops
    series: workload.verb
    logx: true
    where: {workload.shared_context: false}
    published:
      - {x: 64, y: 130, series: {workload.verb: write}, claim: D1, source: DrTM+H fig. 5a}
      - {x: [8, 64], y: 120, series: {workload.verb: read}, source: DrTM+H fig. 5a}
      - {y: 87, label: READ peak, source: DrTM+H sec. 3}
""")
    _fig, ax = draw(sc)
    labels = ax.get_legend().get_texts()
    assert [t.get_text() for t in labels] == [
        "read", "write", "published (DrTM+H fig. 5a)", "published (DrTM+H sec. 3)"]
    stars = [ln for ln in ax.get_lines() if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in stars] == [
        ([64], [130]), ([8, 64], [120, 120])]
    write = next(ln for ln in ax.get_lines() if ln.get_label() == "write")
    assert stars[0].get_markerfacecolor() == write.get_color()
    assert [t.get_text() for t in ax.texts] == ["D1", "READ peak"]


def test_a_claim_shared_by_unlabelled_points_of_a_source_is_named_once_in_the_legend(tmp_path):
    """Two unlabelled D5 points of table T go without text, 'D5' joins T's legend entry;
    the lone unlabelled D1 point and the labelled D5 point keep their text beside them."""
    sc = scenario(tmp_path, """\
  - x: workload.payload
    y: throughput_mops
    series: workload.verb
    where: {workload.shared_context: false}
    published:
      - {x: 8, y: 60, series: {workload.verb: read}, claim: D5, source: T}
      - {x: 64, y: 130, claim: D1, source: T}
      - {x: 64, y: 70, series: {workload.verb: read}, claim: D5, source: T}
      - {x: 8, y: 50, series: {workload.verb: write}, claim: D5, label: D5 write, source: T}
""")
    _fig, ax = draw(sc)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "read", "write", "published (T; D5)"]
    assert [t.get_text() for t in ax.texts] == ["D1", "D5 write"]


def test_a_point_text_on_a_log_y_axis_sits_at_its_point(tmp_path):
    """Lines at 90-95 and a point at 3000 on a log y: the text goes where the point is in
    the final limits (which the point itself widened), inside the axes."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, series: workload.verb,"
                            " logy: true, where: {workload.shared_context: false}, published:"
                            " [{x: 64, y: 3000, series: {workload.verb: write}, label: top,"
                            " source: P}]}\n")
    fig, ax = draw(sc)
    fig.draw_without_rendering()
    (text,) = ax.texts
    at = ax.transAxes.inverted().transform(ax.transData.transform((64, 3000)))
    assert tuple(text.xy) == pytest.approx(tuple(at))
    assert 0 < at[1] < 1


def _legend_beside_axes(fig, ax) -> bool:
    r = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    return ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1


def test_a_legend_with_no_free_place_inside_goes_beside_the_axes(tmp_path):
    """Bars of 100 in both categories, and a published level with its text: no corner
    is free, so the legend is drawn right of the axes."""
    sc = scenario(tmp_path, "  - {x: workload.shared_context, y: throughput_mops,"
                            " series: workload.verb, where: {workload.payload: 64},"
                            " published: [{y: 100, label: peak, source: P}]}\n")
    fig, ax = draw(sc, rows=rows_of(sc, lambda v, p, s: 100.0))
    assert _legend_beside_axes(fig, ax)


def test_a_legend_with_a_free_corner_stays_inside_the_axes(tmp_path):
    """Two flat lines at 90 and 95 from y = 0 leave the lower half free."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, series: workload.verb,"
                            " where: {workload.shared_context: false}}\n")
    fig, ax = draw(sc)
    assert not _legend_beside_axes(fig, ax)


def test_a_published_point_on_a_bar_sits_on_its_series_bar(tmp_path):
    sc = scenario(tmp_path, """\
  - x: workload.shared_context
    y: throughput_mops
    series: workload.verb
    where: {workload.payload: 64}
    published: [{x: true, y: 40, series: {workload.verb: write}, bound: upper, source: P}]
""")
    _fig, ax = draw(sc)
    (pt,) = [ln for ln in ax.get_lines() if ln.get_marker() == "v" and len(ln.get_xdata())]
    assert list(pt.get_xdata()) == [pytest.approx(1.2)] and list(pt.get_ydata()) == [40]


def test_make_plots_writes_the_file_and_skips_a_plot_without_rows(tmp_path):
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, file: a.png}\n"
                            "  - {x: workload.payload, y: throughput_mops, file: b.png,"
                            " where: {workload.verb: cas}}\n")
    assert make_plots(sc, rows_of(sc), tmp_path) == ["a.png"]
    assert (tmp_path / "a.png").stat().st_size > 0 and not (tmp_path / "b.png").exists()


@pytest.mark.parametrize("plot, key, words", [
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 1, claim: D9, source: S}]}",
     "plots[0].published[0].claim", "D1, D2, D5"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 50, claim: D2,"
     " series: {workload.verb: write}, source: S}]}",
     "plots[0].published[0].y", "claim D2 on throughput_mops (100), got 50"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 131, claim: D1, source: S}]}",
     "plots[0].published[0].y", "the published value of claim D1 on throughput_mops (130)"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 128, y: 1, source: S}]}",
     "plots[0].published[0].x", "8, 64, 4KiB"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: [8, 8KiB], y: 1, source: S}]}",
     "plots[0].published[0].x", "or a range within them"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: [64, 8], y: 1, source: S}]}",
     "plots[0].published[0].x", "lo < hi"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 1,"
     " series: {workload.verb: cas}, source: S}]}",
     "plots[0].published[0].series", "select a point of the sweep"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 1, series: {workload.vrb: a},"
     " source: S}]}", "plots[0].published[0].series.workload.vrb", "a swept key"),
    ("{x: workload.payload, y: throughput_mops, published: [{x: 64, y: 1}]}",
     "plots[0].published[0].source", "required"),
    ("{kind: cdf, x: workload.payload}", "plots[0]", "leave x, y and reference out"),
    ("{kind: bars, x: workload.payload}", "plots[0]", "x and y"),
])
def test_published_points_that_contradict_the_scenario_are_refused(tmp_path, plot, key, words):
    """Each wrong published point is refused at load, naming its key path."""
    with pytest.raises(InputError) as e:
        scenario(tmp_path, f"  - {plot}\n")
    assert e.value.key.startswith(key), (e.value.key, str(e.value))
    assert words in str(e.value)


def test_a_point_on_another_series_than_its_claims_value_check_loads(tmp_path):
    """D2's value check is on WRITE (100): a D2 point on READ (50) states another number."""
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, published: [{x: 64,"
                            " y: 50, claim: D2, series: {workload.verb: read}, source: S}]}\n")
    assert sc.plots[0].published[0].y == 50


def test_a_set_override_of_the_swept_x_keeps_the_published_points(tmp_path):
    """``--set workload.payload=128`` runs one payload the paper did not: the points are
    still drawn (the x check applies to the file as written)."""
    plot = "  - {x: workload.payload, y: throughput_mops, published: [{x: 64, y: 1, source: S}]}\n"
    sc = scenario(tmp_path, plot, overrides=["workload.payload=128"])
    assert sc.plots[0].published[0].x == 64


def test_a_reference_column_shared_by_every_series_is_one_black_dashed_line(tmp_path):
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, series: workload.verb,"
                            " reference: [bound_mops], where: {workload.shared_context: false}}\n")
    rows = rows_of(sc)
    for r in rows:
        r["bound_mops"] = {8: 120.0, 64: 110.0, "4KiB": 20.0}[r["workload.payload"]]
    _fig, ax = draw(sc, rows=rows)
    (ref,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert (list(ref.get_xdata()), list(ref.get_ydata())) == ([8, 64, 4096], [120, 110, 20])
    assert ref.get_color() == "black" and ref.get_label() == "bound"


def test_a_reference_column_that_differs_by_series_is_drawn_per_series(tmp_path):
    sc = scenario(tmp_path, "  - {x: workload.payload, y: throughput_mops, series: workload.verb,"
                            " reference: [bound_mops], where: {workload.shared_context: false}}\n")
    rows = rows_of(sc)
    for r in rows:
        r["bound_mops"] = 100.0 if r["workload.verb"] == "read" else 200.0
    _fig, ax = draw(sc, rows=rows)
    refs = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    measured = {ln.get_label(): ln.get_color() for ln in ax.get_lines() if ln.get_marker() != "None"}
    assert [(ln.get_color(), list(ln.get_ydata())) for ln in refs] == [
        ("black", []), (measured["read"], [100.0] * 3), (measured["write"], [200.0] * 3)]
    assert [ln.get_label() for ln in refs if not ln.get_label().startswith("_")] == ["bound"]


@pytest.mark.parametrize("n, message, block, bound", [
    (2, 16 << 20, 1 << 20, 32.0),                 # 2 nodes: k steps of k blocks: the link
    (4, 16 << 20, 1 << 20, 32.0 * 16 / 17),       # l + k - 1 = 2 + 16 - 1 = 17 block times
    (16, 64 << 20, 1 << 20, 32.0 * 64 / 67),      # 4 + 64 - 1
    (4, 1 << 20, 4 << 20, 16.0),                  # a block larger than the message is
])                                                # the message: l = 2 steps of it
def test_the_binomial_pipeline_bound_is_l_plus_k_minus_1_block_times(n, message, block, bound):
    from protocols.rdmc.scenario_kinds import pipeline_bound_gbps

    assert pipeline_bound_gbps(32.0, n, message, block) == pytest.approx(bound, rel=1e-12)
