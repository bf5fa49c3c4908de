"""Honest scorekeeping (rnicsim.claims): a check's role against the profiles' sources, the
strictness of ``agg: worst`` and of ``dominates`` margins, and the validation score."""
from __future__ import annotations

import re

import pytest
from pydantic import TypeAdapter

from rnicsim.claims import BEATS, citations, evaluate, score, score_line
from rnicsim.cli import main
from rnicsim.profile import available_profiles, load_profile
from rnicsim.scenario import Claim

SCENARIO = """name: t
cluster: {{nodes: 2}}
workload: {{kind: microbench, verb: read, payload: 64B}}
run: {{seed: 3, warmup: 5us, measure: 5us}}
expected:
  - {{claim: {claim}, role: {role}, kind: value, metric: throughput_mops, published: 87,
     source: "{source}"}}
"""


def validate(tmp_path, capsys, claim, role, source):
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(claim=claim, role=role, source=source))
    code = main(["validate", str(f)])
    return code, capsys.readouterr().err, f


def test_a_validation_check_whose_claim_a_profile_parameter_cites_is_refused(tmp_path,
                                                                             capsys):
    """cx4-edr's processing units cite "(D1-D4)": a D3 check on cx4-edr is calibration; as
    validation it is refused naming the parameter, the claim and the parameter's source."""
    code, err, f = validate(tmp_path, capsys, "D3", "validation", "DrTM+H sec. 4.2")
    assert code == 2
    assert err == (f"rnicsim validate: error: {f}: expected[0].role: role calibration: "
                   "parameter nic.processing_units of profile cx4-edr cites claim D3 (its "
                   "source: fitted: DrTM+H fig. 5a peaks (D1-D4))\n")
    assert validate(tmp_path, capsys, "D3", "calibration", "DrTM+H sec. 4.2")[0] == 0


def test_a_validation_check_on_a_figure_a_parameter_cites_is_refused(tmp_path, capsys):
    """A check citing fig. 5b of DrTM+H (cx4-edr's qp_cache_entries cites "DrTM+H fig.
    5b") is calibration on cx4-edr whatever its claim id; another figure of the same
    paper, or the same figure number of another paper, is not."""
    code, err, _f = validate(tmp_path, capsys, "D99", "validation", "DrTM+H sec. 4, fig. 5b")
    assert code == 2
    assert "parameter nic.qp_cache_entries of profile cx4-edr cites DrTM+H fig. 5b" in err
    assert validate(tmp_path, capsys, "D99", "validation", "DrTM+H fig. 14")[0] == 0
    assert validate(tmp_path, capsys, "M99", "validation", "RDMC fig. 5b")[0] == 0


def _sources(node: dict, prefix: str = ""):
    """(key path, source) of every parameter of a profile's ``model_dump()``."""
    for k, v in node.items():
        if isinstance(v, dict) and "source" in v:
            yield prefix + k, v["source"]
        elif isinstance(v, dict):
            yield from _sources(v, f"{prefix}{k}.")


def _figures_of(profile, key: str) -> set[tuple[str, str, str]]:
    """The figures parameter ``key`` of ``profile`` cites, as the role check reads them."""
    return next((f for k, _src, _ids, f in citations(profile) if k == key), set())


def test_every_figure_a_shipped_profile_cites_names_its_paper_by_system():
    """The role check knows papers by system only (DrTM+H, RCC, RoCE cluster
    configuration, RDMC): a source citing a figure of a paper named otherwise ("seed 000
    fig. 5b") cites no figure, and a validation check on that figure would not be refused.
    Every figure a shipped profile's parameter cites is seen."""
    cx4 = load_profile("cx4-edr")
    assert _figures_of(cx4, "nic.qp_cache_entries") == {("DrTM+H", "5", "b")}
    for source, figures in (("DrTM+H fig. 5b", {("DrTM+H", "5", "b")}),
                            ("seed 000 fig. 5b", set())):
        p = cx4.with_overrides({"nic.qp_cache_entries": 384}, source)
        assert _figures_of(p, "nic.qp_cache_entries") == figures
    for name in available_profiles():
        p = load_profile(name)
        seen = {key for key, _src, _ids, f in citations(p) if f}
        citing = {key for key, src in _sources(p.model.model_dump())
                  if re.search(r"fig\. \d", src)}
        assert citing - seen == set(), name


def test_every_check_declares_its_role(tmp_path, capsys):
    """A check without ``role`` is refused naming the key."""
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(claim="D3", role="validation", source="s").replace(
        "role: validation, ", ""))
    assert main(["validate", str(f)]) == 2
    assert "expected[0].role: missing required key" in capsys.readouterr().err


def checks(*specs: dict):
    ta = TypeAdapter(Claim)
    return [ta.validate_python({"claim": f"C{i}", "role": "validation", "metric": "m", **s})
            for i, s in enumerate(specs)]


# E6's WRITE/SEND p90 at 64, 128 and 256 B (RoCE demo): their mean, 43.6 us, is within 30%
# of the published ~45 us; 71.7 is not, so "~45 us up to 256 B" fails at every point.
P90 = [{"x": 64, "m": 26.6}, {"x": 128, "m": 32.4}, {"x": 256, "m": 71.7}]


def test_agg_worst_holds_only_when_every_point_does():
    mean, worst = evaluate(checks(
        {"kind": "value", "published": 45, "tolerance": 0.3, "agg": "mean"},
        {"kind": "value", "published": 45, "tolerance": 0.3, "agg": "worst"}), P90)
    assert mean["measured"] == pytest.approx(43.5667, abs=1e-4) and mean["holds"]
    assert worst["measured"] == 71.7 and worst["holds"] is False
    [inside] = evaluate(checks({"kind": "bound", "published": 30, "min": 20, "max": 80,
                                "agg": "worst"}), P90)
    # inside: the worst is the point nearest an edge, relative to it: 71.7 is 10% below
    # 80, 26.6 is 33% above 20
    assert inside["measured"] == 71.7 and inside["holds"]
    [out] = evaluate(checks({"kind": "bound", "published": 30, "min": 20, "max": 70,
                             "agg": "worst"}), P90)
    assert out["measured"] == 71.7 and out["holds"] is False


ROWS = [{"x": 1, "d": "a", "m": 11.3}, {"x": 1, "d": "b", "m": 10.0},
        {"x": 2, "d": "a", "m": 10.05}, {"x": 2, "d": "b", "m": 10.0}]


@pytest.mark.parametrize("extra, test, holds", [
    ({"published": 1.0}, f">= {BEATS:g}", False),        # a 0.5% lead is a tie
    ({"published": 1.0, "margin": 1.0}, ">= 1", True),    # "no faster": a tie will do
    ({"published": 1.12}, ">= 1.12", False),              # "from 1.12x"
    ({"published": 1.12, "range": {"le": 1}}, ">= 1.12", True),
])
def test_dominates_needs_the_published_margin_or_a_win(extra, test, holds):
    """min over x of a/b: 1.13 at x=1, 1.005 at x=2."""
    spec = {"kind": "dominates", "a": {"d": "a"}, "b": {"d": "b"}, "over": "x", **extra}
    [r] = evaluate(checks(spec), ROWS)
    assert (r["test"], r["holds"]) == (test, holds)


@pytest.mark.parametrize("b2, holds", [(0.0, True), (None, False)])
def test_dominates_over_a_zero(b2, holds):
    """a above an exact 0 of b wins by any margin (a stage the other protocol never
    times); where both are 0 nothing is said, and a check left with no pair fails."""
    rows = [{"x": 1, "d": "a", "m": 3.0}, {"x": 1, "d": "b", "m": 0.0}]
    if b2 is None:
        rows[0]["m"] = 0.0
    spec = {"kind": "dominates", "a": {"d": "a"}, "b": {"d": "b"}, "over": "x",
            "published": 1.0}
    [r] = evaluate(checks(spec), rows)
    assert r["holds"] is holds


def test_the_score_counts_validation_checks_only():
    """Two validation checks measured (one holds), one not measured; numeric ones: 2.1
    against 2.0 is 5% off, 2.6 is 30%; the calibration check is reported apart."""
    recs = [{"role": "validation", "numeric": True, "published": 2.0, "measured": 2.1,
             "holds": True},
            {"role": "validation", "numeric": True, "published": 2.0, "measured": 2.6,
             "holds": False},
            {"role": "validation", "numeric": False, "published": 1.0,
             "measured": float("nan"), "holds": None},
            {"role": "calibration", "numeric": True, "published": 130, "measured": 130,
             "holds": True}]
    s = score(recs)
    assert s == {"validation": {"hold": 1, "measured": 2, "total": 3},
                 "numeric": {"measured": 2, "within_10pct": 1, "within_25pct": 1},
                 "calibration": {"hold": 1, "measured": 1}}
    assert score_line(s) == ("validation score: 1 of 2 checks hold (1 not measured); "
                             "numeric: 1 and 1 of 2 within 10% and 25% of the paper "
                             "(calibration, not counted: 1 of 1 hold)")
