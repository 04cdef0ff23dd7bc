"""``logbook detect``'s filters, its incident view and the findings it writes."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from _cli import invoke

from logbook.cli_findings import MAX_ROWS, select, view
from logbook.detectors import detect
from logbook.incidents import group
from logbook.schema import Finding

ROOT = Path(__file__).resolve().parents[1]
SPIKE = str(ROOT / "fixtures" / "megatron" / "spike_restart.log")


def f(kind: str, severity: str, lo: int, hi: int, **ev) -> Finding:
    return Finding(
        kind=kind, detector=kind, severity=severity, step=lo, start_step=lo, end_step=hi,
        evidence=ev, id=f"{kind}@{lo}",
    )  # fmt: skip


def test_a_spike_its_restart_and_the_lr_cut_are_one_incident(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys, "detect", SPIKE)
    lines = out.splitlines()
    assert code == 0
    assert lines[1] == (
        "verdict: damaged: 1 critical incident(s) (loss_spike+divergence+restart at 76..96), "
        "1 more info finding(s)"  # the LR cut at the restart is told in the incident
    )
    story = " ".join(x.strip() for x in lines[2:5])
    assert story.startswith("critical           76..96  grad_norm_drift, grad_norm_spike from")
    # in the order it happened: precursors, spike, divergence, the restart, the LR cut
    order = [story.index(k) for k in ("loss_spike", "divergence", "restart at 76", "LR 2.913e-04")]
    assert order == sorted(order)
    assert lines[-2:] == [
        "info: 1 overflow_skip",
        "7 finding(s): 3 critical, 2 warning, 2 info (--all lists every one; --min-severity, "
        "--kind, --steps filter)",
    ]


def test_filters_and_fail_on_judge_the_selection(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys, "detect", SPIKE, "--all", "--kind", "restart")
    rows = [x.split()[:2] for x in out.splitlines()[2:-1]]
    assert (code, rows) == (0, [["warning", "restart"]])
    code, out, _ = invoke(
        monkeypatch, capsys, "detect", SPIKE, "--json", "--min-severity", "critical"
    )
    kinds = [json.loads(x)["kind"] for x in out.splitlines()]
    assert kinds == ["grad_norm_spike", "loss_spike", "divergence"]
    code, out, _ = invoke(monkeypatch, capsys, "detect", SPIKE, "--json", "--steps", "97:")
    assert out == ""
    args = ("detect", SPIKE, "--kind", "lr_change", "--fail-on", "warning")
    assert invoke(monkeypatch, capsys, *args)[0] == 0  # only an info finding selected
    assert invoke(monkeypatch, capsys, "detect", SPIKE, "--fail-on", "warning")[0] == 1


def test_bad_filters_are_one_line_exit_2(monkeypatch, capsys, tmp_path):
    code, _, err = invoke(monkeypatch, capsys, "detect", SPIKE, "--steps", "5-9")
    assert code == 2
    assert err == "logbook: error: --steps '5-9': use A:B, A: or :B (steps, inclusive)\n"
    code, _, err = invoke(monkeypatch, capsys, "detect", SPIKE, "--min-severity", "bad")
    assert code == 2
    assert err == "logbook: error: --min-severity 'bad': use info, warning or critical\n"
    code, _, err = invoke(monkeypatch, capsys, "detect", SPIKE, "-o", str(tmp_path / "x.txt"))
    assert code == 2 and err.endswith("use a .csv, .parquet or .jsonl file\n")
    assert not (tmp_path / "x.txt").exists()


def test_findings_written_as_csv_parquet_and_jsonl(monkeypatch, capsys, tmp_path):
    for suffix in ("csv", "parquet", "jsonl"):
        path = tmp_path / f"findings.{suffix}"
        code, _, err = invoke(monkeypatch, capsys, "detect", SPIKE, "--output", str(path))
        assert (code, err) == (0, f"wrote 7 finding(s) to {path}\n")
        if suffix == "jsonl":
            rows = [json.loads(x) for x in path.read_text().splitlines()]
            kinds = [r["kind"] for r in rows]
        else:
            frame = pl.read_csv(path) if suffix == "csv" else pl.read_parquet(path)
            kinds = frame.get_column("kind").to_list()
            rows = frame.to_dicts()
            assert json.loads(rows[0]["evidence"])  # the evidence as JSON text
        assert len(kinds) == 7 and kinds.count("restart") == 1
        assert [r["step"] for r in rows if r["kind"] == "restart"] == [76]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "findings.csv", "findings.jsonl", "findings.parquet",
    ]  # fmt: skip


def test_the_view_keeps_to_one_screen_and_names_every_critical_incident():
    many = [f("grad_norm_spike", "warning", 100 * i, 100 * i + 1, ratio=10 + i) for i in range(80)]
    crit = [f("loss_spike", "critical", 100 * i + 50, 100 * i + 55, ratio=3.0) for i in (3, 70)]
    info = [f("overflow_skip", "info", 100 * i + 20, 100 * i + 20) for i in range(300)]
    text = view([*many, *crit, *info], "run: 9 records")
    lines = text.splitlines()
    assert len(lines) <= 40
    assert lines[1].startswith("verdict: damaged: 2 critical incident(s) (loss_spike at 350..355;")
    assert sum(x.startswith("critical") for x in lines) == 2
    assert sum(x.startswith("warning") for x in lines) == MAX_ROWS - 2
    assert lines[-3] == f"... {80 - (MAX_ROWS - 2)} more warning incident(s): 58 grad_norm_spike"
    assert lines[-2] == "info: 300 overflow_skip"
    # the largest warnings are the ones shown
    shown = [x.split(" x")[1].split()[0] for x in lines if x.startswith("warning")]
    assert shown == [str(r) for r in range(89 - (MAX_ROWS - 2) + 1, 90)]  # in step order


def test_precursors_join_the_incident_of_what_they_precede():
    spike = f("loss_spike", "critical", 700, 707, ratio=3.0)
    drift = f("grad_norm_drift", "info", 400, 500, ratio=1.5)
    drift.precedes, drift.lead_steps = "loss_spike@700", 300
    (inc,) = group([drift, spike])
    assert (inc.start, inc.end, inc.kinds) == (400, 707, ["grad_norm_drift", "loss_spike"])
    assert inc.account() == (
        "grad_norm_drift from step 400 (300 steps ahead) -> loss_spike x3 at 700"
    )


def test_select_by_steps_kind_and_severity():
    fs = [f("loss_spike", "critical", 10, 12), f("restart", "info", 40, 40)]
    assert select(fs, steps=(11, 30)) == fs[:1]
    assert select(fs, steps=(None, 5)) == []
    assert select(fs, kinds=["restart,stall"]) == fs[1:]
    assert select(fs, min_severity="warning") == fs[:1]


def test_a_run_of_many_spikes_still_fits_one_screen():
    import numpy as np

    from logbook.run import Run

    n = 20_000
    rs = np.random.RandomState(0)
    loss = 3.0 * np.exp(0.01 * rs.standard_normal(n))
    loss[rs.choice(np.arange(100, n), 60, replace=False)] *= 1.8  # lone records, 58 deviations
    run = Run(metrics=pl.DataFrame({"step": np.arange(1, n + 1), "loss": loss}))
    found = detect(run)
    assert sum(x.kind == "loss_spike" for x in found) == 60
    lines = view(found, "run").splitlines()
    assert len(lines) <= 40 and lines[-1].startswith("60 finding(s): 0 critical, 60 warning")


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    import logbook.cli_findings as cf

    crit = [f("loss_spike", "critical", 10, 12, ratio=3.0)]
    monkeypatch.setattr(cf.sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" in view(crit)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in view(crit)


def test_all_table_on_a_terminal_is_drawn_to_its_width(monkeypatch):
    import re

    import logbook.cli_findings as cf

    long = "loss rose 3.00x " + "and kept rising " * 12 + "END"
    found = [
        f("loss_spike", "critical", 10, 12, ratio=3.0).model_copy(
            update={"message": long, "score": 3.0}
        ),
        f("grad_norm_spike", "warning", 20, 20, ratio=2.0),
    ]
    monkeypatch.setattr(cf.sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("NO_COLOR", raising=False)
    drawn = cf.table(found, "run.log (megatron)")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", drawn).splitlines()
    assert plain[0] == "run.log (megatron)"
    assert plain[1].split() == ["SEVERITY", "KIND", "STEP", "START..END", "SCORE", "WHAT"]
    assert max(len(x) for x in plain) <= 80
    assert plain[2].split()[:5] == ["critical", "loss_spike", "10", "10..12", "3"]
    # the message wraps in its column, every word of it kept
    what = plain[1].index("WHAT")
    end = next(i for i, x in enumerate(plain) if x.startswith("warning"))
    assert all(not x[:what].strip() for x in plain[3:end])
    assert " ".join(x[what:] for x in plain[2:end]).split() == long.split()
    assert plain[-1] == "2 finding(s): 1 critical, 1 warning, 0 info"
    assert "\x1b[1;31mcritical" in drawn  # critical in bold red
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[31" not in cf.table(found) and "\x1b[33" not in cf.table(found)


def test_all_table_piped_is_one_plain_line_per_finding(monkeypatch):
    import logbook.cli_findings as cf

    found = [f("loss_spike", "critical", 10, 12, ratio=3.0), f("stall", "warning", 20, 20)]
    monkeypatch.setattr(cf.sys.stdout, "isatty", lambda: False, raising=False)
    lines = cf.table(found).splitlines()
    assert "\x1b[" not in "".join(lines)
    assert [x.split()[:2] for x in lines[1:3]] == [["critical", "loss_spike"], ["warning", "stall"]]
    assert len(lines) == 4
