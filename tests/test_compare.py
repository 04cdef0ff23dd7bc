"""``logbook compare``: headline figures, alignment, config differences, the HTML page
and the one-line errors."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from _cli import invoke

import parsers
from logbook.compare import build_comparison, write_comparison
from logbook.compare.align import aligned, labels_for, metric_columns
from logbook.compare.config_diff import config_diff, event_config, meta_config, record_config
from logbook.compare.table import Headline, terminal_table
from logbook.errors import UsageError
from logbook.run import Run, RunMeta
from logbook.schema import ConfigChange

ROOT = Path(__file__).resolve().parents[1]
SHAKESPEARE = ROOT / "fixtures" / "nanogpt" / "shakespeare_char.log"
SPIKE = ROOT / "fixtures" / "nanogpt" / "tiny_spike.log"
HF = ROOT / "fixtures" / "hf_trainer" / "trainer_state.json"
HF_REWIND = ROOT / "fixtures" / "hf_trainer" / "rewind"
MEGATRON = ROOT / "fixtures" / "megatron" / "spike_restart.log"

NANOGPT_TABLE = """\
run                   format   records  first step  last step  final loss  min loss  critical  warning  info  restarts
shakespeare_char.log  nanogpt        9           0        500       1.487     1.487         2        1     0         1
tiny_spike.log        nanogpt       61           0         60       35.58     1.292         2        0     0         0"""  # noqa: E501


def read(path: Path) -> Run:
    return parsers.read_logs([path], None, "UTC")[0]


def metrics_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def stamped(path: Path, steps: range, seconds_per_step: int, tokens: bool = True) -> Path:
    rows = []
    for s in steps:
        t = s * seconds_per_step
        row = {
            "step": s,
            "loss": 3.0 - 0.01 * s,
            "time": f"2024-01-01T{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z",
        }
        if tokens:
            row["tokens"] = 4096 * s
        rows.append(row)  # fmt: skip
    return metrics_jsonl(path, rows)


def stored(path: Path, name: str, events: list | None = None, **meta) -> Path:
    """A logbook JSONL run: ten steps of loss and lr, a header with ``meta``."""
    frame = pl.DataFrame({"step": list(range(10)), "loss": [3.0 - 0.1 * s for s in range(10)],
                          "lr": [1e-4 * (s + 1) for s in range(10)]})  # fmt: skip
    Run(metrics=frame, events=events or [], meta=RunMeta(name=name, format="jsonl", **meta)).write(
        path
    )
    return path


# ---- headline figures --------------------------------------------------------------


def test_terminal_table_of_two_nanogpt_runs(monkeypatch, capsys):
    code, out, err = invoke(monkeypatch, capsys, "compare", str(SHAKESPEARE), str(SPIKE))
    assert (code, err) == (0, "")
    assert out == NANOGPT_TABLE + "\n"


def test_headline_figures_of_the_nanogpt_fixtures():
    c = build_comparison([read(SHAKESPEARE), read(SPIKE)])
    assert c.headlines[0] == Headline(
        name="shakespeare_char.log", format="nanogpt", records=9, first_step=0, last_step=500,
        final_loss=1.487, min_loss=1.487, findings={"critical": 2, "warning": 1, "info": 0},
        restarts=1,
    )  # fmt: skip
    h = c.headlines[1]
    assert (h.records, h.first_step, h.last_step, h.restarts) == (61, 0, 60, 0)
    assert h.final_loss == pytest.approx(35.58, abs=5e-3)
    assert h.min_loss == pytest.approx(1.292, abs=5e-4)
    assert h.findings == {"critical": 2, "warning": 0, "info": 0}
    assert terminal_table(c.headlines) == NANOGPT_TABLE


def test_headline_figures_of_the_hf_trainer_fixtures(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys, "compare", str(HF), str(HF_REWIND))
    assert code == 0
    rows = [line.split() for line in out.splitlines()]
    assert rows[1] == ["hf_trainer/trainer_state.json", "hf-trainer", "6", "2", "12", "3.906",
                       "3.89", "0", "0", "0", "0"]  # fmt: skip
    assert rows[2] == ["rewind/trainer_state.json", "hf-trainer", "9", "2", "12", "3.906",
                       "3.89", "0", "1", "3", "1"]  # fmt: skip


def test_a_file_of_several_runs_gives_each_of_them(monkeypatch, capsys, tmp_path):
    two = tmp_path / "two.log"
    lines = [f"step {s} | loss {2.5 - 0.1 * i:.2f} | lr 1.0e-04" for i, s in enumerate([1, 2, 3])]
    lines += [f"step {s} | loss {3.1 - 0.1 * i:.2f} | lr 1.0e-04" for i, s in enumerate([1, 2])]
    two.write_text("\n".join(lines) + "\n")
    code, out, err = invoke(monkeypatch, capsys, "compare", str(two))
    assert (code, err) == (0, "")
    assert [line.split()[:3] for line in out.splitlines()[1:]] == [
        ["two.log", "text", "3"],
        ["two.log#2", "text", "2"],
    ]


def test_labels_of_runs_with_one_name_are_told_apart():
    runs = [read(HF), read(HF_REWIND), read(HF)]
    assert labels_for(runs) == [
        "trainer_state.json #1",
        "rewind/trainer_state.json",
        "trainer_state.json #2",
    ]


# ---- alignment ---------------------------------------------------------------------


def test_aligned_by_step_follows_the_trajectory():
    frame = aligned(read(SHAKESPEARE), "step")
    assert frame.get_column("x").to_list() == [0.0, 10.0, 20.0, 240.0, 250.0, 260.0, 500.0]
    assert frame.get_column("segment").to_list() == [0, 0, 0, 0, 1, 1, 1]
    assert frame.get_column("loss").to_list()[-3:] == [1.8111, 1.792, 1.487]


def test_aligned_by_tokens_and_by_time(tmp_path):
    run = read(stamped(tmp_path / "a.jsonl", range(0, 40, 10), 30))
    assert aligned(run, "tokens").get_column("x").to_list() == [0.0, 40960.0, 81920.0, 122880.0]
    assert aligned(run, "time").get_column("x").to_list() == [0.0, 300.0, 600.0, 900.0]
    late = read(stamped(tmp_path / "b.jsonl", range(100, 130, 10), 2))
    # wall time counts from each run's own first record
    assert aligned(late, "time").get_column("x").to_list() == [0.0, 20.0, 40.0]


def test_metrics_overlaid_are_those_any_run_has():
    assert metric_columns([read(SHAKESPEARE), read(SPIKE)]) == ["loss", "step_time_s", "mfu_pct"]
    assert metric_columns([read(HF), read(MEGATRON)]) == [
        "loss", "lr", "grad_norm", "loss_scale", "step_time_s", "batch_size", "num_zeros",
        "samples_per_second", "tflops", "train_runtime", "train_tokens_per_second",
    ]  # fmt: skip


def test_align_time_and_tokens_write_a_page(monkeypatch, capsys, tmp_path):
    a = stamped(tmp_path / "a.jsonl", range(0, 40, 10), 30)
    b = stamped(tmp_path / "b.jsonl", range(0, 60, 10), 20)
    for how in ("time", "tokens"):
        out = tmp_path / f"{how}.html"
        code, said, err = invoke(monkeypatch, capsys, "compare", str(a), str(b), "--align", how,
                                 "-o", str(out))  # fmt: skip
        assert (code, err) == (0, "")
        assert said.splitlines()[-1] == (
            f"wrote {out}: 2 runs aligned by {how}, 1 figure(s), 0 config key(s) differ"
        )
        page = out.read_text()
        assert f"<p>2 runs aligned by {how}; no config in the logs.</p>" in page
        assert page.count('<figure class="overlay"') == 1


# ---- config ------------------------------------------------------------------------


def test_config_keys_that_differ(tmp_path):
    a = stored(tmp_path / "a.jsonl", "base", trainer_state={"train_batch_size": 8,
               "max_steps": 100, "global_step": 100}, train_iters=100,
               events=[ConfigChange(step=0, key="dtype", new="bfloat16"),
                       ConfigChange(step=0, key="seed", new="1")])  # fmt: skip
    b = stored(tmp_path / "b.jsonl", "wide", trainer_state={"train_batch_size": 16,
               "max_steps": 100, "global_step": 90}, train_iters=100,
               events=[ConfigChange(step=0, key="dtype", new="float16"),
                       ConfigChange(step=0, key="seed", new="1")])  # fmt: skip
    runs = [Run.read(a), Run.read(b)]
    assert meta_config(runs[0]) == {"train_iters": "100", "trainer_state.max_steps": "100",
                                    "trainer_state.train_batch_size": "8"}  # fmt: skip
    assert event_config(runs[1]) == {"dtype": "float16", "seed": "1"}
    assert record_config(runs[0]) == {"peak lr": "0.001"}
    diff = config_diff(runs)
    assert diff.keys == 6
    assert diff.rows == [("trainer_state.train_batch_size", "header", ["8", "16"]),
                         ("dtype", "log", ["bfloat16", "float16"])]  # fmt: skip
    assert diff.sentence() == "2 of 6 config key(s) differ"


def test_config_of_the_nanogpt_fixtures():
    diff = config_diff([read(SHAKESPEARE), read(SPIKE)])
    assert diff.rows == [("max_iters", "log", ["500", None])]


def test_config_of_the_hf_trainer_fixtures():
    diff = config_diff([read(HF), read(HF_REWIND)])
    assert diff.differing == ["trainer_state.max_steps"]
    assert diff.rows[0][2] == ["12", "10"]


def test_records_say_batch_size_changes_and_loss_scaling(tmp_path):
    rows = [{"step": s, "loss": 2.0, "batch_size": 8 if s < 3 else 16, "loss_scale": 1024.0}
            for s in range(6)]  # fmt: skip
    run = read(metrics_jsonl(tmp_path / "a.jsonl", rows))
    assert record_config(run) == {"batch_size": "8 -> 16", "loss scaling": "dynamic (fp16)"}


def test_no_config_in_the_logs(tmp_path):
    a = read(metrics_jsonl(tmp_path / "a.jsonl", [{"step": s, "loss": 2.0} for s in range(5)]))
    b = read(metrics_jsonl(tmp_path / "b.jsonl", [{"step": s, "loss": 3.0} for s in range(5)]))
    diff = config_diff([a, b])
    assert (diff.keys, diff.rows, diff.sentence()) == (0, [], "no config in the logs")
    out = write_comparison(build_comparison([a, b]), tmp_path / "c.html")
    assert "<p>No config in the logs.</p>" in out.read_text()


# ---- the page ----------------------------------------------------------------------


def test_page_of_two_nanogpt_runs(monkeypatch, capsys, tmp_path):
    out = tmp_path / "compare.html"
    code, said, err = invoke(monkeypatch, capsys, "compare", str(SHAKESPEARE), str(SPIKE),
                             "-o", str(out))  # fmt: skip
    assert (code, err) == (0, "")
    assert said == NANOGPT_TABLE + (
        f"\nwrote {out}: 2 runs aligned by step, 3 figure(s), 1 config key(s) differ\n"
    )
    page = out.read_text()
    runs = html_attr(json.dumps(["shakespeare_char.log", "tiny_spike.log"]))
    figures = re.findall(r'<figure class="overlay" id="fig-overlay_(\w+)" data-metric="(\w+)" '
                         r'data-runs="([^"]*)">', page)  # fmt: skip
    assert figures == [("loss", "loss", runs), ("step_time_s", "step_time_s", runs),
                       ("mfu_pct", "mfu_pct", runs)]  # fmt: skip
    assert '<li data-run="tiny_spike.log" data-points="61">' in page
    assert '<section class="run-incidents" data-run="shakespeare_char.log" data-findings="3">' in (
        page
    )
    assert '<section class="run-incidents" data-run="tiny_spike.log" data-findings="2">' in page
    assert page.count('class="sev-critical"') == 4
    assert "loss nan at step 260" in page
    assert "<td>max_iters</td><td>log</td><td>500</td><td>(not in the log)</td>" in page
    assert oct(os.stat(out).st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.html"]  # no temp file left


def test_the_same_runs_give_the_same_bytes(tmp_path):
    pages = []
    for name in ("a.html", "b.html"):
        c = build_comparison([read(HF), read(HF_REWIND)])
        pages.append(write_comparison(c, tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
    assert [f.metric for f in c.figures] == [
        "loss", "lr", "grad_norm", "train_runtime", "train_tokens_per_second",
    ]  # fmt: skip
    assert [f.runs for f in c.figures][0] == [
        ("hf_trainer/trainer_state.json", "#1f77b4", 6),
        ("rewind/trainer_state.json", "#ff7f0e", 6),
    ]


def html_attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;")


def test_text_from_the_logs_is_escaped(tmp_path):
    bad = '<img src=x onerror="alert(1)">&'
    a = stored(tmp_path / "a.jsonl", bad, events=[ConfigChange(step=0, key="<k>", new="<b>v</b>")])
    b = stored(tmp_path / "b.jsonl", "plain")
    out = write_comparison(build_comparison([Run.read(a), Run.read(b)]), tmp_path / "c.html")
    page = out.read_text()
    assert "<img src=x" not in page and "<b>v</b>" not in page and "<k>" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in page
    assert "<td>&lt;k&gt;</td><td>log</td><td>&lt;b&gt;v&lt;/b&gt;</td>" in page


def test_an_existing_page_is_replaced(monkeypatch, capsys, tmp_path):
    out = tmp_path / "compare.html"
    out.write_text("old")
    out.chmod(0o600)
    code, _, _ = invoke(monkeypatch, capsys, "compare", str(HF), str(HF_REWIND), "-o", str(out))
    assert code == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert oct(os.stat(out).st_mode & 0o777) == "0o644"


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([str(SPIKE)], "compare needs at least 2 runs, got 1"),
        ([], "no run given (logbook compare RUN RUN... [-o compare.html])"),
        ([str(SPIKE), str(MEGATRON), "--align", "tokens"],
         "--align tokens: run tiny_spike.log has no tokens column (try --align step)"),
        ([str(MEGATRON), str(SPIKE), "--align", "time"],
         "--align time: run spike_restart.log has no timestamps (try --align step)"),
        ([str(SPIKE), str(MEGATRON), "--align", "epoch"],
         "--align 'epoch': one of step, tokens, time"),
        ([str(SPIKE), str(MEGATRON), "-o", "x.htm"],
         "output x.htm: a comparison is .html, not '.htm'"),
        ([str(SPIKE), str(MEGATRON), "-o", "compare"],
         "output compare: a comparison is .html, not 'a name without a suffix'"),
        ([str(SPIKE), "/no/such/run.log"], "/no/such/run.log: no such file"),
        ([str(SPIKE), str(MEGATRON), "-o", "/no/such/dir/c.html"],
         "output /no/such/dir/c.html: folder /no/such/dir does not exist (create it first)"),
    ],
)  # fmt: skip
def test_errors_are_one_line_with_exit_2(monkeypatch, capsys, args, message):
    code, out, err = invoke(monkeypatch, capsys, "compare", *args)
    assert (code, out) == (2, "")
    assert err == f"logbook: error: {message}\n"


def test_unreadable_input_is_one_line(monkeypatch, capsys, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    code, out, err = invoke(monkeypatch, capsys, "compare", str(junk), str(SPIKE))
    assert (code, out) == (2, "")
    assert err.startswith("logbook: error: ") and err.count("\n") == 1
    assert "Traceback" not in err and "internal error" not in err


def test_build_comparison_names_the_run_without_the_column(tmp_path):
    a = read(stamped(tmp_path / "a.jsonl", range(0, 40, 10), 30, tokens=False))
    b = read(stamped(tmp_path / "b.jsonl", range(0, 40, 10), 30))
    message = "--align tokens: run a.jsonl has no tokens column (try --align step)"
    with pytest.raises(UsageError) as caught:
        build_comparison([b, a], "tokens")
    assert str(caught.value) == message
    assert [h.records for h in build_comparison([b, a], "time").headlines] == [4, 4]
    with pytest.raises(UsageError, match="^compare needs at least 2 runs, got 0$"):
        build_comparison([])
