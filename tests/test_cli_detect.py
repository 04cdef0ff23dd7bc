"""``logbook detect`` end to end, in process, on the runs in fixtures/detect/."""

import json
import sys
from pathlib import Path

import pytest
from _cli import invoke

from logbook.cli_findings import REQUIRED_KEYS
from logbook.run import Run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "detect"
CASES = sorted(
    p.name[: -len(".jsonl")] for p in FIXTURES.glob("*.jsonl") if ".expected" not in p.name
)


def test_fixtures_are_there():
    assert CASES == ["collapse_nan", "healthy", "spike_precursor"]


@pytest.mark.parametrize("case", CASES)
def test_json_output_matches_expected(monkeypatch, capsys, case):
    code, out, err = invoke(
        monkeypatch, capsys, "detect", str(FIXTURES / f"{case}.jsonl"), "--json"
    )
    assert (code, err) == (0, "")
    assert out == (FIXTURES / f"{case}.expected.jsonl").read_text()
    for line in out.splitlines():
        obj = json.loads(line)
        assert list(obj)[: len(REQUIRED_KEYS)] == list(REQUIRED_KEYS)


def test_default_view_tells_the_incident(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys, "detect", str(FIXTURES / "spike_precursor.jsonl"))
    assert code == 0
    assert out.splitlines() == [
        "spike_precursor (synthetic): 1,000 records, 1 segment(s), steps 1..1000",
        "verdict: damaged: 1 critical incident(s) (loss_spike at 658..707)",
        "critical         658..707  grad_norm_drift from step 658 (34 steps ahead) -> "
        "loss_spike x2.987 at 701",
        "2 finding(s): 1 critical, 1 warning, 0 info",
    ]


def test_table_output(monkeypatch, capsys):
    code, out, _ = invoke(
        monkeypatch, capsys, "detect", str(FIXTURES / "spike_precursor.jsonl"), "--all"
    )
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "spike_precursor (synthetic): 1,000 records, 1 segment(s), steps 1..1000"
    assert lines[1].split() == ["SEVERITY", "KIND", "STEP", "START..END", "SCORE", "WHAT"]
    assert lines[2].split()[:4] == ["warning", "grad_norm_drift", "666", "658..714"]
    assert lines[2].endswith("[precursor of loss_spike@700, 34 steps ahead]")
    assert lines[3].split()[:4] == ["critical", "loss_spike", "700", "700..707"]
    assert lines[-1] == "2 finding(s): 1 critical, 1 warning, 0 info"


def test_fail_on(monkeypatch, capsys):
    healthy, spike = str(FIXTURES / "healthy.jsonl"), str(FIXTURES / "spike_precursor.jsonl")
    assert invoke(monkeypatch, capsys, "detect", healthy, "--fail-on", "warning")[0] == 0
    assert invoke(monkeypatch, capsys, "detect", spike, "--fail-on", "warning")[0] == 1
    assert invoke(monkeypatch, capsys, "detect", spike, "--fail-on", "critical")[0] == 1
    code, _, err = invoke(monkeypatch, capsys, "detect", spike, "--fail-on", "info")
    assert (code, err) == (2, "logbook: error: --fail-on 'info': use warning or critical\n")


def test_set_and_config_change_the_findings(monkeypatch, capsys, tmp_path):
    spike = str(FIXTURES / "spike_precursor.jsonl")
    _, out, _ = invoke(
        monkeypatch, capsys, "detect", spike, "--json", "--set", "loss_spike.enabled=false"
    )
    assert [json.loads(x)["kind"] for x in out.splitlines()] == ["grad_norm_drift"]
    cfg = tmp_path / "quiet.toml"
    cfg.write_text("[grad_norm_drift]\nenabled = false\n[precursors]\nenabled = false\n")
    _, out, _ = invoke(monkeypatch, capsys, "detect", spike, "--json", "--config", str(cfg))
    (only,) = [json.loads(x) for x in out.splitlines()]
    assert only["kind"] == "loss_spike" and "precursors" not in only["evidence"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "loss_spike.nope=1"], "unknown key loss_spike.nope (valid keys of loss_spike: "),
        (["--set", "nosuch.z=1"], "unknown detector 'nosuch' (valid: "),
        (["--config", "missing.toml"], "config missing.toml: cannot read"),
    ],
)
def test_bad_config_is_one_line_exit_2(monkeypatch, capsys, args, message):
    code, out, err = invoke(monkeypatch, capsys, "detect", str(FIXTURES / "healthy.jsonl"), *args)
    assert code == 2 and out == ""
    assert err.startswith("logbook: error: " + message) and err.count("\n") == 1


def test_bad_input_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    code, _, err = invoke(monkeypatch, capsys, "detect")
    assert (code, err) == (2, "logbook: error: no log file given (logbook detect LOG...)\n")
    code, _, err = invoke(monkeypatch, capsys, "detect", str(tmp_path / "none.jsonl"))
    assert code == 2 and err.endswith("none.jsonl: no such file\n")


def test_empty_run_and_list(monkeypatch, capsys, tmp_path):
    path = tmp_path / "empty.jsonl"
    Run().write(path)
    code, out, _ = invoke(monkeypatch, capsys, "detect", str(path))
    assert (code, out) == (
        0,
        "run: 0 records, 0 segment(s)\nverdict: no records to judge the run by\n",
    )
    code, out, _ = invoke(monkeypatch, capsys, "detect", "--list")
    assert code == 0 and out.startswith("# Detectors\n") and "## `loss_spike`" in out


def test_detect_does_not_import_heavy_modules():
    import subprocess

    fixture = str(FIXTURES / "healthy.jsonl")
    code = (
        f"import sys; sys.argv=['logbook','detect',{fixture!r}];"
        "from logbook import cli\n"
        "try: cli.main()\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('matplotlib','torch','pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
