"""rnicsim.profile: shipped profiles, sources, rejection of bad profile files, overrides, CLI."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rnicsim.cli import main
from rnicsim.errors import InputError
from rnicsim.profile import PROFILE_DIR, Profile, available_profiles, load_profile

SHIPPED = available_profiles()
SECTIONS = ("link", "switch", "pcie", "nic", "host")


def _params(model):
    """(dotted key, param) for every parameter of a loaded profile model."""
    for sec in SECTIONS:
        s = getattr(model, sec)
        for k in type(s).model_fields:
            v = getattr(s, k)
            if hasattr(v, "source"):
                yield f"{sec}.{k}", v
            else:  # per-opcode times
                for op in type(v).model_fields:
                    yield f"{sec}.{k}.{op}", getattr(v, op)


def _raw(name: str = "cx4-edr") -> dict:
    return yaml.safe_load((PROFILE_DIR / f"{name}.yaml").read_text())


def _write(tmp_path: Path, raw: dict, name: str = "bad.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


# --------------------------------------------------------------------------- shipped
def test_the_documented_profiles_are_shipped():
    """The profiles ARCHITECTURE.md names exist."""
    assert {"cx3-fdr", "cx3-roce-10g", "cx4-edr", "cx4-roce-100g", "cx5-edr",
            "cx3-qdr"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_loads(name):
    """Each shipped profile validates and exposes plain numbers in base units."""
    p = load_profile(name)
    assert isinstance(p, Profile) and p.name == name
    assert p.link.kind in ("ib", "roce")
    assert 0 < p.link.rate < p.link.signal_rate           # data rate after encoding
    assert p.link.mtu in (256, 512, 1024, 2048, 4096)
    assert p.pcie.rate > 1e9 and p.pcie.latency > 0
    assert p.nic.processing_units >= 1 and p.nic.uar_shared >= 1
    assert set(p.nic.requester) == {"send", "write", "read", "atomic"}
    assert p.nic.atomic_mode in ("concurrent", "stall_nic")
    assert p.host.clock > 1e8


@pytest.mark.parametrize("name", SHIPPED)
def test_every_parameter_has_a_source(name):
    """Every parameter says where its number comes from (a non-blank source)."""
    params = list(_params(load_profile(name).model))
    assert len(params) > 40
    blank = [k for k, v in params if not v.source or not v.source.strip()]
    assert blank == []


def test_units_are_applied(cx4):
    """cx4-edr: 103.125 Gb/s x 64/66 data rate, 4 KiB MTU, 280 ns PCIe latency, 2.2 GHz."""
    assert cx4.link.rate == pytest.approx(100e9, rel=1e-12)
    assert cx4.link.mtu == 4096
    assert cx4.pcie.latency == 280.0
    assert cx4.host.clock == pytest.approx(2.2e9)
    assert cx4.nic.requester["read"] == 80.0


def test_a_profile_loads_by_path(tmp_path):
    """A path to a YAML file loads like a name."""
    p = load_profile(str(_write(tmp_path, _raw("cx3-qdr"), "mine.yaml")))
    assert p.name == "cx3-qdr" and p.link.mtu == 2048


@pytest.mark.parametrize("name", SHIPPED)
def test_overrides_with_nothing_reproduce_the_profile(name):
    """with_overrides({}) re-validates the dumped model without changing any value."""
    p = load_profile(name)
    q = p.with_overrides({})
    assert [(k, v.value) for k, v in _params(q.model)] == \
        [(k, v.value) for k, v in _params(p.model)]


# --------------------------------------------------------------------------- bad files
def test_unknown_key_names_file_and_key_path(tmp_path):
    """An unknown parameter is rejected with the file and its dotted key path."""
    raw = _raw()
    raw["nic"]["turbo"] = {"value": 1, "source": "wishful thinking"}
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as e:
        load_profile(str(path))
    assert e.value.source == str(path) and e.value.key == "nic.turbo"
    assert str(path) in str(e.value) and "unknown key" in str(e.value)


@pytest.mark.parametrize("value,expected", [
    ("10us", "expected a mapping of idle state names"),
    ({"C1E": "10us"}, "idle state 'C1E': expected '<exit latency>/<target residency>'"),
    ({"C1E": "10us/fast"}, "idle state 'C1E': "),
])
def test_bad_idle_states_name_the_key_and_the_form(tmp_path, value, expected):
    """host.idle_states must map state names to '<exit>/<residency>' durations."""
    raw = _raw()
    raw["host"]["idle_states"]["value"] = value
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as e:
        load_profile(str(path))
    assert e.value.key == "host.idle_states.value" and expected in str(e.value)


def test_idle_states_are_kept_in_order_of_residency(tmp_path):
    """States written in any order are searched shallow to deep; {} means none."""
    raw = _raw("cx4-edr")
    raw["host"]["idle_states"]["value"] = {"C6": "133us/400us", "C1": "2us/2us"}
    p = load_profile(str(_write(tmp_path, raw)))
    assert list(p.host.idle_states) == ["C1", "C6"]
    assert p.host.idle_states["C6"] == (133_000.0, 400_000.0)
    raw["host"]["idle_states"]["value"] = {}
    assert load_profile(str(_write(tmp_path, raw, "none.yaml"))).host.idle_states == {}


def test_unknown_section_names_file_and_key(tmp_path):
    """An unknown top-level section is rejected."""
    raw = _raw()
    raw["gpu"] = {}
    path = _write(tmp_path, raw)
    with pytest.raises(InputError, match=re.escape(f"{path}: gpu: unknown key")):
        load_profile(str(path))


def test_missing_key_names_file_and_key_path(tmp_path):
    """A missing parameter is rejected with the file and its dotted key path."""
    raw = _raw()
    del raw["pcie"]["latency"]
    path = _write(tmp_path, raw)
    with pytest.raises(InputError, match=re.escape(f"{path}: pcie.latency: missing")):
        load_profile(str(path))


def test_missing_source_names_the_parameter(tmp_path):
    """A parameter without its source is rejected."""
    raw = _raw()
    del raw["host"]["mmio"]["source"]
    path = _write(tmp_path, raw)
    with pytest.raises(InputError, match=re.escape(f"{path}: host.mmio.source: missing")):
        load_profile(str(path))


@pytest.mark.parametrize("key, value, unit_word", [
    (("pcie", "latency"), "200Gbps", "duration"),
    (("link", "signal_rate"), "100ns", "rate"),
    (("link", "mtu"), "4 KiBi", "size"),
    (("host", "clock"), "2.2Gbps", "frequency"),
])
def test_wrong_unit_names_file_key_path_and_expected_unit(tmp_path, key, value, unit_word):
    """A quantity in the wrong unit is rejected with the file, key path and expected kind."""
    raw = _raw()
    raw[key[0]][key[1]]["value"] = value
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as e:
        load_profile(str(path))
    msg = str(e.value)
    assert str(path) in msg and f"{key[0]}.{key[1]}" in e.value.key
    assert unit_word in msg


@pytest.mark.parametrize("key, value", [
    (("nic", "processing_units"), -1), (("nic", "processing_units"), 2.5),
    (("nic", "atomic_mode"), "sometimes"), (("link", "kind"), "ethernet"),
    (("link", "encoding"), 1.5),
])
def test_impossible_values_are_rejected(tmp_path, key, value):
    """Counts below zero, fractional counts, unknown choices and ratios > 1 are rejected."""
    raw = _raw()
    raw[key[0]][key[1]]["value"] = value
    path = _write(tmp_path, raw)
    with pytest.raises(InputError) as e:
        load_profile(str(path))
    assert e.value.source == str(path) and e.value.key.startswith(f"{key[0]}.{key[1]}")


def test_invalid_yaml_and_missing_file(tmp_path):
    """Invalid YAML and a missing file raise InputError naming the file."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("link: {kind: [ib\n")
    with pytest.raises(InputError, match="valid YAML") as e:
        load_profile(str(bad))
    assert e.value.source == str(bad)
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="existing profile") as e:
        load_profile(str(missing))
    assert e.value.source == str(missing)


def test_a_key_given_twice_is_refused(tmp_path):
    """A parameter written twice in one section is an error naming both lines, not the
    last value silently (PyYAML's default)."""
    text = ((PROFILE_DIR / "cx4-edr.yaml").read_text().replace(
        "  mmio_latency:", "  mmio_latency: {value: 1ns, source: x}\n  mmio_latency:", 1))
    bad = tmp_path / "dup.yaml"
    bad.write_text(text)
    with pytest.raises(InputError, match="mmio_latency.*repeated") as e:
        load_profile(str(bad))
    assert e.value.source == str(bad) and e.value.key.startswith("line ")


def test_a_directory_or_a_non_utf8_file_is_not_a_profile(tmp_path):
    """A directory given as the profile path, and a file that is not UTF-8, raise
    InputError naming the path (not IsADirectoryError / UnicodeDecodeError)."""
    with pytest.raises(InputError, match="a profile YAML file") as e:
        load_profile(str(tmp_path))
    assert e.value.source == str(tmp_path)
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(InputError, match="a profile YAML file"):
        load_profile(str(folder))
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(yaml.safe_dump(_raw()).encode() + "# caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8") as e:
        load_profile(str(latin))
    assert e.value.source == str(latin)


@pytest.mark.parametrize("key", [("nic", "processing_units"), ("nic", "atomic_units"),
                                 ("nic", "uar_shared"), ("nic", "recv_prefetch"),
                                 ("nic", "max_rd_atomic"), ("nic", "ack_coalesce"),
                                 ("host", "cores")])
def test_counts_the_hardware_needs_one_of_must_be_at_least_1(tmp_path, key):
    """A count the simulator cannot run with 0 of (it would clamp it to 1, divide by it or
    never issue/fetch anything) is rejected at 0 instead of being silently changed."""
    raw = _raw()
    raw[key[0]][key[1]]["value"] = 0
    path = _write(tmp_path, raw)
    with pytest.raises(InputError, match=">= 1, got 0") as e:
        load_profile(str(path))
    assert e.value.key == f"{key[0]}.{key[1]}.value"


def test_counts_that_may_be_0_still_load(cx4):
    """No QP-context cache, no translation cache, no dedicated doorbells: valid profiles."""
    q = cx4.with_overrides({"nic.qp_cache_entries": 0, "nic.mtt_cache_entries": 0,
                            "nic.uar_dedicated": 0})
    assert (q.nic.qp_cache_entries, q.nic.mtt_cache_entries, q.nic.uar_dedicated) == (0, 0, 0)


def test_a_bare_number_is_taken_in_the_base_unit(tmp_path):
    """Documented (README, Profiles): ``{value: 60}`` is 60 ns, 60 B, 60 bit/s."""
    raw = _raw()
    raw["host"]["mmio"]["value"] = 60
    raw["link"]["mtu"]["value"] = 1024
    p = load_profile(str(_write(tmp_path, raw)))
    assert (p.host.mmio, p.link.mtu) == (60.0, 1024)


def test_messages_show_what_was_written_and_what_is_expected(tmp_path):
    """An impossible encoding is quoted as written (not as the parsed fraction); a value
    without its {value, source} wrapper says that wrapper is expected."""
    raw = _raw()
    raw["link"]["encoding"]["value"] = "7b/3b"
    with pytest.raises(InputError) as e:
        load_profile(str(_write(tmp_path, raw)))
    assert "'7b/3b'" in str(e.value) and "64b/66b" in str(e.value)
    assert "2.333" not in str(e.value)
    raw = _raw()
    raw["host"]["mmio"] = "60ns"
    with pytest.raises(InputError) as e:
        load_profile(str(_write(tmp_path, raw)))
    assert e.value.key == "host.mmio"
    assert "{value: 300ns, source: " in str(e.value) and "'60ns'" in str(e.value)
    assert "instance of" not in str(e.value)


def test_unknown_profile_name_lists_the_available_ones():
    """An unknown profile name is rejected with the list of shipped profiles."""
    with pytest.raises(InputError) as e:
        load_profile("cx9-xdr")
    assert e.value.key == "cx9-xdr"
    for name in SHIPPED:
        assert name in str(e.value)


# --------------------------------------------------------------------------- overrides
def test_overrides_apply_units_and_keep_the_original(cx4):
    """with_overrides parses unit strings into a copy and leaves the original unchanged."""
    q = cx4.with_overrides({"pcie.latency": "300ns", "link.mtu": "2KiB",
                            "nic.requester.read": "1us", "nic.processing_units": 4})
    assert (q.pcie.latency, q.link.mtu, q.nic.requester["read"],
            q.nic.processing_units) == (300.0, 2048, 1000.0, 4)
    assert (cx4.pcie.latency, cx4.link.mtu, cx4.nic.requester["read"],
            cx4.nic.processing_units) == (280.0, 4096, 80.0, 16)
    assert "pcie.latency=300ns" in q.model.pcie.latency.source


@pytest.mark.parametrize("key", ["pcie.latncy", "nope.x", "nic.requester.rdma", "pcie",
                                 "pcie.latency.value.x"])
def test_overrides_reject_unknown_keys(cx4, key):
    """An override of something that is not a profile parameter names the key."""
    with pytest.raises(InputError) as e:
        cx4.with_overrides({key: 1}, "cluster.nic.overrides")
    assert e.value.source == "cluster.nic.overrides"
    assert e.value.key.startswith(key.split(".")[0])


@pytest.mark.parametrize("key, value", [
    ("pcie.latency", "3 parsecs"), ("pcie.latency", "-5ns"), ("link.signal_rate", 0),
    ("nic.processing_units", -2), ("nic.atomic_mode", "maybe"),
])
def test_overrides_are_validated(cx4, key, value):
    """An override with a bad value is rejected like the same value in a profile file."""
    with pytest.raises(InputError) as e:
        cx4.with_overrides({key: value}, "command line --set")
    assert e.value.source == "command line --set"
    assert e.value.key.startswith(key)


# --------------------------------------------------------------------------- CLI
def test_cli_profiles_lists_every_profile(capsys):
    """``rnicsim profiles`` exits 0 and prints one line per shipped profile."""
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert [line.split()[0] for line in lines] == SHIPPED


def test_cli_profiles_json_lists_every_profile(capsys):
    """``rnicsim profiles --json`` prints the list as JSON (name, link, rate, model,
    description), not the text table."""
    assert main(["profiles", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == SHIPPED
    cx4 = rows[SHIPPED.index("cx4-edr")]
    assert cx4["link"] == "ib" and cx4["rate_gbps"] == pytest.approx(100.0)
    assert cx4["nic_model"] and cx4["description"]


def test_cli_profiles_directory_exits_2(tmp_path, capsys):
    """``rnicsim profiles DIR`` exits 2 with a message, no traceback."""
    assert main(["profiles", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "a profile YAML file" in err and "Traceback" not in err


def test_cli_profiles_shows_one_profile_with_sources(capsys):
    """``rnicsim profiles cx4-edr`` exits 0 and shows each section, value and source."""
    assert main(["profiles", "cx4-edr"]) == 0
    out = capsys.readouterr().out
    for sec in SECTIONS:
        assert f"[{sec}]" in out
    assert "Mellanox SB7890 datasheet" in out
    assert re.search(r"latency\s+280 ns", out)


def test_cli_profiles_unknown_name_exits_2(capsys):
    """``rnicsim profiles cx9`` exits 2 listing the available profiles on stderr."""
    assert main(["profiles", "cx9"]) == 2
    err = capsys.readouterr().err
    assert "cx9" in err and "cx4-edr" in err
