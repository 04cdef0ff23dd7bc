"""W&B exports: history Parquet and CSV, chart CSV (bucketed), a sampled history, and
the files that are refused (fixtures/wandb/make_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _rows import normalized, written_rows

import parsers
from logbook.errors import InputError
from logbook.run import Run
from logbook.segments import stitch
from logbook.textio import read_lines, split_lines
from parsers import wandb

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"
CASES = ["chart_bucketed.csv", "history_pandas.csv", "history.parquet"]


def run_of(path: Path) -> Run:
    parts = wandb.read_path(path)
    metrics, events = stitch(parts, [str(path)])
    return Run(metrics=metrics, events=events)


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    got = written_rows(run_of(Path(case)), tmp_path)
    stem = case.rsplit(".", 1)[0]
    expected = (FIXTURES / f"{stem}.expected.jsonl").read_text().splitlines()
    assert got == normalized(expected)


def parse(name: str):
    lines, _ = read_lines(FIXTURES / name)
    return wandb.parse(lines, name), lines


def test_history_csv_uses_the_trainer_step_and_splits_evaluations():
    p, lines = parse("history_pandas.csv")
    m = p.metrics
    assert m.get_column("step").to_list() == [10, 20, 30, 40]
    assert m.get_column("wandb_step").to_list() == [0, 1, 3, 4]
    assert m.get_column("loss").to_list() == [2.5, 2.25, 2.0, 1.75]
    assert m.get_column("lr").to_list() == [0.001, 0.00075, 0.0005, 0.00025]
    assert m.get_column("runtime_s").to_list() == [12.5, 17.5, 22.5, 27.5]
    assert str(m.get_column("time")[0]) == "2023-11-14 22:13:20+00:00"
    assert [(e.step, e.split, e.values) for e in p.events] == [
        (20, "eval", {"loss": 2.375, "runtime": 0.75, "epoch": 0.5}),
        (40, "eval", {"loss": 1.875, "runtime": 0.75, "epoch": 1.0}),
    ]
    assert m.height + len(p.events) + p.ignored == lines.height
    assert p.meta["caveats"] == []


def test_parquet_export_equals_the_csv():
    csv, _ = parse("history_pandas.csv")
    (pq,) = wandb.read_path(FIXTURES / "history.parquet")
    cols = ["step", "loss", "lr", "grad_norm", "epoch", "runtime_s", "time"]
    assert pq.metrics.select(cols).equals(csv.metrics.select(cols))
    assert [e.values for e in pq.events] == [e.values for e in csv.events]
    assert pq.meta["lines"] == 6  # rows of the table


def test_chart_export_is_flagged_as_buckets():
    p, _ = parse("chart_bucketed.csv")
    m = p.metrics
    assert m.get_column("step").to_list() == [0, 50, 100, 150]
    assert m.get_column("loss").to_list() == [10.8765, 6.2105, 4.1032, 3.5521]
    assert m.get_column("loss_max").to_list() == [10.8765, 7.9021, 4.312, 9.7734]
    assert m.get_column("loss_min").to_list() == [10.8765, 6.0312, 3.9987, 3.4409]
    assert p.meta["bucketed"] is True and p.meta["run"] == "fluent-sun-12"
    assert p.meta["caveats"][0].startswith("W&B chart export: each row is the last point")


def test_sampled_history_is_flagged():
    p, _ = parse("sampled_500.csv")
    assert p.metrics.height == 500 and p.meta["sampled"] is True
    assert p.meta["caveats"][0].startswith("W&B: 500 rows, as run.history() returns by default")


def test_a_chart_of_two_runs_is_two_runs():
    path = FIXTURES / "chart_two_runs.csv"
    runs = parsers.read_logs(path)
    assert [r.meta.name for r in runs] == list(dict.fromkeys(r.meta.name for r in runs))
    assert len(runs) == 2 and all(r.metrics.height for r in runs)
    with pytest.raises(InputError, match="holds 2 runs .*: read them with read_logs"):
        parsers.read_log(path)


def test_refused_files():
    with pytest.raises(InputError, match="a W&B runs table .* holds no history"):
        parse("runs_table.csv")


def test_sniffing():
    def head(name: str) -> list[str]:
        return (FIXTURES / name).read_text().splitlines()

    assert wandb.sniff(head("chart_bucketed.csv")) == 90
    assert wandb.sniff(head("history_pandas.csv")) == 85
    assert wandb.sniff(head("runs_table.csv")) == 70
    assert wandb.sniff(["epoch,step,loss", "0,1,2"]) == 0
    assert wandb.sniff_path(FIXTURES / "history.parquet") == 90
    assert wandb.sniff_path(FIXTURES / "history_pandas.csv") == 0


def test_a_logbook_parquet_is_not_claimed(tmp_path):
    run = run_of(FIXTURES / "history.parquet")
    out = tmp_path / "run.parquet"
    run.write(out)
    assert wandb.sniff_path(out) == 0


def test_text_columns_are_skipped_and_said():
    lines, _ = split_lines(b"_step,loss,media\n0,1.5,img.png\n1,1.25,img2.png\n")
    p = wandb.parse(lines, "h.csv")
    assert p.metrics.get_column("loss").to_list() == [1.5, 1.25]
    assert p.meta["caveats"][0] == "W&B: 1 column(s) without numbers skipped: media"
    assert "W&B's _step (one per log call) used" in p.meta["caveats"][1]


def test_an_export_cut_inside_its_header_is_one_empty_run_with_its_line_counted(tmp_path):
    raw = (FIXTURES / "chart_two_runs.csv").read_bytes()
    cut = tmp_path / "cut.csv"
    cut.write_bytes(raw[: raw.index(b"\n") // 2])
    runs = parsers.read_logs(str(cut))
    assert len(runs) == 1 and runs[0].metrics.height == 0
    st = runs[0].meta.parse[0]
    assert (st.format, st.lines, st.ignored, st.unrecognized) == ("wandb", 1, 1, 0)


def test_history_rows_with_eval_values_beside_the_loss_are_records_too(tmp_path):
    head = ",_step,_runtime,trainable_parameters,_timestamp,train/loss,train/lr,eval/loss\n"
    rows = [
        "0,0,7.37,533476352.0,1772452553.97,,,",
        "1,1,68.5,,1772452608.75,0.178,0.0,",
        "2,2,70.1,,1772452610.75,0.176,1e-05,0.165",
        "3,3,71.9,,1772452612.75,0.497,1e-05,",
    ]
    path = tmp_path / "wandb_history.csv"
    path.write_text(head + "\n".join(rows) + "\n")
    (run,) = parsers.read_logs(path)
    # the parameter count alone on _step 0 is no record; step 2 is a record and an event
    assert run.metrics.select("step", "loss").rows() == [(1, 0.178), (2, 0.176), (3, 0.497)]
    assert [(e.step, e.values["loss"]) for e in run.events_of("validation")] == [(2, 0.165)]
