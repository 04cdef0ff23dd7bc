"""Megatron-family logs: fixtures against their expected runs, then each rule."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _rows import events_of as events

import parsers
from logbook.textio import split_lines
from parsers import megatron

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "megatron"
LOGS = sorted(FIXTURES.glob("*.log"))
HEADER_KEYS = ("schema", "format", "sources", "units", "caveats", "parse", "columns")

REC = (
    " iteration {step:8d}/     100 | consumed samples: {samples:12d} | elapsed time per "
    "iteration (ms): 1500.0 | learning rate: 1.000E-04 | global batch size:    32 | "
    "lm loss: {loss} | loss scale: {scale} | grad norm: 1.500 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)


def rec(step: int, loss: str = "2.500000E+00", scale: str = "1024.0") -> str:
    return REC.format(step=step, samples=32 * step, loss=loss, scale=scale)


def parse_text(text: str):
    lines, _ = split_lines(text.encode())
    return megatron.parse(lines, "x.log")


# ---- fixtures ------------------------------------------------------------------------


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fixture_gives_its_expected_run(log, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out.jsonl"
    parsers.read_log(str(log.relative_to(ROOT))).write(out)
    got = [json.loads(x) for x in out.read_text().splitlines()]
    want = [json.loads(x) for x in log.with_suffix(".expected.jsonl").read_text().splitlines()]
    assert {k: got[0].get(k) for k in HEADER_KEYS} == {k: want[0][k] for k in HEADER_KEYS}
    assert got[1:] == want[1:]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_line_is_accounted_for(log):
    text = log.read_text()
    parsed = parse_text(text)
    counts = parsed.meta["line_counts"]
    assert sum(counts.values()) == text.count("\n")
    assert counts["ignored"] == parsed.ignored
    assert counts["unrecognized"] == parsed.unrecognized.len()
    assert counts["record"] >= parsed.metrics.height
    assert parsers.sniff(log) == "megatron"


def test_spike_restart_fixture_is_what_its_generator_writes(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen", FIXTURES / "make_spike_restart.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    monkeypatch.setattr(gen, "OUT", tmp_path / "spike.log")
    gen.main()
    assert (tmp_path / "spike.log").read_bytes() == (FIXTURES / "spike_restart.log").read_bytes()


def test_cli_parses_the_readme_fixture(tmp_path):
    out = tmp_path / "run.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "logbook.cli", "parse", "fixtures/megatron/spike_restart.log"]
        + ["-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "megatron: 121 records, 2 segment(s), steps 1..100"


# ---- records ---------------------------------------------------------------------------


def test_a_modern_record_is_read_whole():
    line = (
        " [2024-06-03 14:02:17.512831] iteration       10/    2000 | consumed samples:"
        "         5120 | elapsed time per iteration (ms): 1422.7 | throughput per GPU "
        "(TFLOP/s/GPU): 402.1 | learning rate: 1.500000E-05 | global batch size:   512 | "
        "lm loss: 9.812345E+00 | z_loss: 4.5E-02 | loss scale: 1.0 | grad norm: 12.345 | "
        "num zeros: 3.0 | params norm: 301.234 | number of skipped iterations:   1 | number "
        "of nan iterations:   2 |"
    )
    parsed = parse_text(line + "\n")
    assert parsed.metrics.to_dicts() == [
        {
            "line": 1,
            "step": 10,
            "time": datetime(2024, 6, 3, 14, 2, 17, 512831, tzinfo=UTC),
            "samples": 5120,
            "step_time_s": 1.4227,
            "throughput_per_gpu": 402.1,
            "lr": 1.5e-05,
            "batch_size": 512,
            "loss": 9.812345,
            "z_loss": 0.045,
            "loss_scale": 1.0,
            "grad_norm": 12.345,
            "num_zeros": 3.0,
            "param_norm": 301.234,
            "skipped": 1,
            "nan_count": 2,
        }
    ]
    assert parsed.meta["train_iters"] == 2000


@pytest.mark.parametrize(
    "prefix",
    ["", "   ", "[default7]:", "[default3]: ", "[rank12]: ", "1: ", "slurm_procid 0 : "]
    + ["worker-3: [default0]:", "node17: ", "localhost: ", "192.168.205.202: "],
)
def test_launcher_and_rank_prefixes(prefix):
    parsed = parse_text(f"{prefix}{rec(5)}\n{prefix}[2024-01-02 03:04:05] {rec(6).strip()}\n")
    assert parsed.metrics.select("step", "loss", "samples").rows() == [(5, 2.5, 160), (6, 2.5, 192)]
    assert parsed.metrics.get_column("time").to_list() == [
        None,
        datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    ]
    assert parsed.unrecognized.len() == 0


def test_a_placeholder_for_the_time_stamp_is_a_stamp_with_no_time(tmp_path):
    # a README with the date written over: ``[xxxx-xx-xx xx:xx:xx] iteration 100/ 100 |``
    p = tmp_path / "x.log"
    p.write_text(f"[xxxx-xx-xx xx:xx:xx] {rec(99).strip()}\n [xxxx-xx-xx xx:xx:xx] {rec(100)}\n")
    (run,) = parsers.read_logs(p)
    assert run.meta.format == "megatron"
    assert run.metrics.select("step", "loss", "nan_count").rows() == [(99, 2.5, 0), (100, 2.5, 0)]
    assert run.metrics.get_column("time").to_list() == [None, None]


LOAD_TIMER = "(min, max) time across ranks (ms):\n    load-checkpoint ......: ({}, {})\n"


@pytest.mark.parametrize(
    ("times", "first", "restarts"),
    [
        # a checkpoint read for 32 s, then iteration 10: resumed after 9
        ((32107.12, 32108.53), 10, [("restart", 9, 10)]),
        # a load path with nothing in it (milliseconds), or a first step of 1: no resume
        ((0.31, 0.52), 10, []),
        ((32107.12, 32108.53), 1, []),
    ],
)
def test_a_load_timer_before_the_first_record_is_a_resume(times, first, restarts, tmp_path):
    p = tmp_path / "x.log"
    p.write_text(LOAD_TIMER.format(*times) + f"{rec(first)}\n{rec(first + 1)}\n")
    (run,) = parsers.read_logs(p)
    assert [(e.kind, e.resume_step, e.step) for e in run.events] == restarts
    assert run.meta.parse[0].unrecognized == 0


def test_learning_rate_precision_and_elapsed_units():
    ms = " iteration 1/ 9 | elapsed time per iteration (ms): 22306.6 | learning rate: 9.850E-05 |"
    s = " iteration 2/ 9 | elapsed time per iteration (s): 105.16 | learning rate: 3.333333E-05 |"
    parsed = parse_text(f"{ms}\n{s}\n")
    assert parsed.metrics.select("step", "step_time_s", "lr").rows() == [
        (1, 22.3066, 9.85e-05),
        (2, 105.16, 3.333333e-05),
    ]


def test_other_keys_keep_snake_case_names():
    line = (
        " iteration 3/ 9 | lm loss: 2.0E+00 | sop loss: 7.5E-01 | mtp_1 loss: 2.1E+00 | "
        "load_balancing_loss: 1.0E+00 | tokens per gpu per second (tgs): 2707.5 | TFLOPs: 41.47 |"
        " curriculum seqlen:   512 | samples per second: 3.5 | current time: 1706860208.35 |"
        " skipped samples: 128 |"
    )
    m = parse_text(line + "\n").metrics.to_dicts()[0]
    assert {k: m[k] for k in m if k not in ("line", "step", "time")} == {
        "loss": 2.0,
        "sop_loss": 0.75,
        "mtp_1_loss": 2.1,
        "load_balancing_loss": 1.0,
        "tgs": 2707.5,
        "tflops": 41.47,
        "curriculum_seqlen": 512,
        "samples_per_second": 3.5,
        "current_time": 1706860208.35,
        "skipped_samples": 128,
    }


def test_gpt_neox_record():
    line = (
        " samples/sec: 4.904 | iteration        2/   55000 | elapsed time per iteration (ms): "
        "6524.7 | learning rate: 2.424E-09 | approx flops per GPU: 16.4TFLOPS | lm_loss: "
        "2.175701E+00 | loss scale: 4096.0 | number of skipped iterations:   0 | number of nan "
        "iterations:   0 |"
    )
    m = parse_text(line + "\n").metrics.to_dicts()[0]
    assert (m["step"], m["samples_per_second"], m["tflops"], m["loss"], m["lr"]) == (
        2,
        4.904,
        16.4,
        2.175701,
        2.424e-09,
    )


def test_the_same_record_from_64_ranks_is_kept_once():
    text = "".join(f"[default{r % 8}]:{rec(s)}\n" for s in (1, 2) for r in range(64))
    parsed = parse_text(text)
    assert parsed.metrics.select("step", "line").rows() == [(1, 1), (2, 65)]
    assert parsed.ignored == 126 and parsed.meta["duplicate_records"] == 126


def test_deepspeeds_engine_line_beside_each_record_is_put_aside(tmp_path):
    # Megatron-DeepSpeed: the pipeline engine prints its own line (another loss, the
    # micro-batch mean) before the record of the same step
    text = "".join(
        f"steps: {s} loss: 10.3150 iter time (s): 5.118 samples/sec: 50.021\n{rec(s)}\n"
        for s in (10, 20, 30)
    )
    path = tmp_path / "x.log"
    path.write_text(text)
    (run,) = parsers.read_logs(path)
    assert run.metrics.select("step", "line", "loss").rows() == [
        (10, 2, 2.5), (20, 4, 2.5), (30, 6, 2.5)
    ]  # fmt: skip
    assert run.meta.parse[0].ignored == 3


def test_a_second_launch_from_scratch_keeps_its_records_though_its_values_repeat():
    # a deterministic job run twice (a sweep): the same losses at the same steps, but
    # ``training ...`` opens a launch, so the second run's records are not rank copies
    one = "done with setup ...\ntraining ...\n" + "".join(f"{rec(s)}\n" for s in (1, 2))
    parsed = parse_text(one + one)
    assert parsed.metrics.select("step", "line").rows() == [(1, 3), (2, 4), (1, 7), (2, 8)]
    assert "duplicate_records" not in parsed.meta


def test_a_record_wrapped_mid_word_is_joined():
    whole = rec(7)
    cut1, cut2 = whole.index("learning") + 5, whole.index("skipped") + 4
    text = whole[:cut1] + "\n" + whole[cut1:cut2] + "\n" + whole[cut2:] + "\n" + rec(8) + "\n"
    parsed = parse_text(text)
    assert parsed.metrics.select("step", "line", "lr", "skipped").rows() == [
        (7, 1, 1e-4, 0),
        (8, 4, 1e-4, 0),
    ]
    assert parsed.meta["line_counts"] == {"record": 4, "event": 0, "ignored": 0, "unrecognized": 0}


def test_a_record_wrapped_right_after_a_bar_is_joined():
    # Megatron-Bridge output pasted at 86 columns: the first piece ends in ``|``
    whole = rec(10)
    cut1 = whole.index("elapsed")
    cut2 = whole.index("size:")
    text = "```\n" + whole[:cut1] + "\n" + whole[cut1:cut2] + "\n" + whole[cut2:] + "\n"
    text += rec(20) + "\n```\n"
    parsed = parse_text(text)
    assert parsed.metrics.select("step", "line", "loss", "lr", "batch_size").rows() == [
        (10, 2, 2.5, 1e-4, 32),
        (20, 5, 2.5, 1e-4, 32),
    ]
    assert parsed.meta["line_counts"] == {"record": 4, "event": 0, "ignored": 2, "unrecognized": 0}


def test_a_nan_step_without_its_loss_field_gives_a_missing_loss_event():
    nan = rec(12).replace(" lm loss: 2.500000E+00 |", "").replace("1.500", "nan")
    cut = rec(13)[: rec(13).index("global") + 3]  # cut before the loss would be printed
    parsed = parse_text(f"{rec(11)}\n{nan}\n{cut}\n")
    assert parsed.metrics.select("step", "loss", "grad_norm").rows()[:2] == [
        (11, 2.5, 1.5),
        (12, None, pytest.approx(float("nan"), nan_ok=True)),
    ]
    assert events(parsed, "nonfinite") == [
        {"kind": "nonfinite", "step": 12, "segment": 0, "metric": "loss", "value": "missing"}
    ]
    assert parsed.meta["caveats"] == [
        "1 record(s) cut mid-line: only their complete fields were read"
    ]


def test_a_line_cut_inside_the_iteration_field_is_unrecognized():
    parsed = parse_text(f"{rec(1)}\n iteration       2/     1")
    assert parsed.metrics.height == 1 and parsed.unrecognized.to_list() == [2]


def test_validation_block():
    text = (
        "-" * 40 + "\n validation loss at iteration 100 | lm loss value: 8.095942E+00 | "
        "lm loss PPL: 3.281128E+03 | \n" + "-" * 40 + "\n"
        " validation loss at the end of training for test data | lm loss value: 7.5E+00 | "
        "lm loss PPL: 1.808042E+03 | sop loss value: 5.0E-01 | \n"
    )
    assert events(parse_text(text), "validation") == [
        {
            "kind": "validation",
            "step": 100,
            "segment": 0,
            "split": "valid",
            "values": {"loss": 8.095942, "ppl": 3281.128},
        },
        {
            "kind": "validation",
            "segment": 0,
            "split": "test",
            "values": {"loss": 7.5, "ppl": 1808.042, "sop_loss": 0.5},
        },
    ]


def test_megatron_deepspeeds_validation_on_a_sample_draw():
    text = (
        f"{rec(2500)}\n validation loss at iteration 2500 on 320-sample draw from validation "
        "set | lm loss value: 1.360287E+01 | lm loss PPL: 8.084497E+05 | \n"
        " validation loss at iteration 2500 on 320-sample draw from test set | lm loss value: "
        "1.495915E+01 | lm loss PPL: 3.138158E+06 | \n"
    )
    got = [
        (e["step"], e["split"], e["values"]["loss"]) for e in events(parse_text(text), "validation")
    ]
    assert got == [(2500, "valid", 13.60287), (2500, "test", 14.95915)]


def test_a_checkpoint_save_is_one_event():
    text = (
        f"{rec(25)}\nsaving checkpoint at iteration      25 to /ckpt/a\n"
        "[2024-01-01 00:00:00,250] [INFO] [logging.py:68:log_dist] [Rank 0] Saving model "
        "checkpoint: /ckpt/a/global_step25/mp_rank_00_model_states.pt\n"
        "  successfully saved checkpoint at iteration      25 to /ckpt/a\n"
        "time (ms) | save-checkpoint: 57514.53\n"
    )
    parsed = parse_text(text)
    assert events(parsed, "checkpoint_save") == [
        {
            "kind": "checkpoint_save",
            "step": 25,
            "segment": 0,
            "path": "/ckpt/a",
            "save_time_s": 57.51453,
        }
    ]
    assert parsed.meta["line_counts"]["event"] == 4


def test_overflow_lines_of_rank_zero_become_skips_at_the_next_record():
    skip = "[deepscale] OVERFLOW! Rank {} Skipping step. Attempted loss scale: {}, reducing to {}"
    text = "\n".join(
        [rec(1), skip.format(0, "1024.0", "512.0"), skip.format(3, "1024.0", "512.0")]
        + [rec(2, scale="512.0"), ""]
    )
    parsed = parse_text(text)
    assert events(parsed, "overflow_skip") == [
        {
            "kind": "overflow_skip",
            "step": 2,
            "segment": 0,
            "step_source": "record",
            "count": 1,
            "attempted_scale": 1024.0,
            "new_scale": 512.0,
        }
    ]


def test_planned_total_comes_from_the_last_record_that_shows_it():
    import polars as pl

    from parsers.megatron import _train_iters

    texts = [f" iteration {i:8d}/    5000 | lm loss: 2.0 |" for i in range(1, 200)]
    texts += [
        "[default3]:[2024-05-01 10:00:00] iteration      200/    8000 | lm loss: 2.0 |",
        " samples/sec: 12.5 | iteration      201/    9000 | lm_loss: 2.0 |",  # GPT-NeoX
        "a record line whose start was cut off | lm loss: 2.0 |",
    ]
    assert _train_iters(pl.Series(texts)) == 9000
    assert _train_iters(pl.Series(texts[:200])) == 8000
    assert _train_iters(pl.Series(["no record here"] * 130)) is None
    assert _train_iters(pl.Series([], dtype=pl.String)) is None


def test_an_early_forks_fields_without_colons_are_read(tmp_path):
    # Chinese-Transformer-XL and other 2019-2020 forks: ``lm loss 6.758929E+00 |``
    rec = (
        " iteration {i:8d}/    3000 | elapsed time per iteration (ms): 12879.0 | "
        "learning rate {lr} | lm loss {loss} | loss scale {scale} |\n"
    )
    text = rec.format(i=400, lr="6.300E-06", loss="6.758929E+00", scale="64.0")
    text += rec.format(i=500, lr="7.917E-06", loss="NAN", scale="8.0")
    path = tmp_path / "x.log"
    path.write_text(text)
    (run,) = parsers.read_logs(path)
    rows = run.metrics.select("step", "loss", "lr", "loss_scale", "step_time_s").rows()
    assert rows[0] == (400, 6.758929, 6.3e-06, 64.0, 12.879)
    assert rows[1][0] == 500 and rows[1][1] != rows[1][1]  # NaN
    assert [(e.step, e.old, e.new) for e in run.events_of("loss_scale_change")] == [
        (500, 64.0, 8.0)
    ]


def test_a_value_that_does_not_read_is_left_empty_and_counted(tmp_path):
    rec = (
        " iteration {i:8d}/ 1000 | consumed samples: {s} | learning rate: 6.000E-05 | "
        "lm loss: {loss} | loss scale: 65536.0 | grad norm: {g} |\n"
    )
    text = rec.format(i=1, s=512, loss="2.345678E+00", g="1.2")
    text += rec.format(i=2, s=1024, loss="2.2", g="abc")
    text += rec.format(i=3, s=1536, loss="n/a", g="1.1")
    path = tmp_path / "x.log"
    path.write_text(text)
    (run,) = parsers.read_logs(path)
    rows = run.metrics.select("step", "loss", "grad_norm").rows()
    assert rows == [(1, 2.345678, 1.2), (2, 2.2, None), (3, None, 1.1)]
    assert "2 value(s) unreadable, left empty; first at line 2" in run.meta.caveats


def test_pipeline_engine_lines_give_the_steps_no_record_gives():
    # GPT-NeoX on DeepSpeed's pipeline engine: the engine prints every 2 steps, NeoX's
    # own record every 4 (and a checkpoint save between); a shared step keeps NeoX's record
    pipe = "steps: {s} loss: {l:.4f} iter time (s): 1.250 samples/sec: 25.600"
    lines = []
    for s in range(2, 13, 2):
        lines.append(pipe.format(s=s, l=3.0 - s / 100))
        if s % 4 == 0:
            lines.append(rec(s, loss=f"{3.0 - s / 100 + 0.001:.6E}"))
    lines.insert(4, "saving checkpoint at iteration       4 to checkpoints")
    parsed = parse_text("\n".join(lines) + "\n")
    m = parsed.metrics
    assert m.get_column("step").to_list() == [2, 4, 6, 8, 10, 12]
    assert m.get_column("loss").to_list() == [2.98, 2.961, 2.94, 2.921, 2.9, 2.881]
    assert m.get_column("lr").to_list() == [None, 1e-4, None, 1e-4, None, 1e-4]
    assert m.get_column("step_time_s").to_list()[::2] == [1.25, 1.25, 1.25]
    assert parsed.meta["line_counts"] == {
        "record": 6, "event": 1, "ignored": 3, "unrecognized": 0
    }  # fmt: skip
    assert any("3 step(s) read from DeepSpeed's pipeline" in c for c in parsed.meta["caveats"])
    assert [(e.kind, e.step) for e in parsed.events] == [("checkpoint_save", 4)]


def test_a_scale_fall_without_a_skipped_counter_is_an_overflow_of_that_interval():
    # an old release prints no skipped counter: the scale fell 1024 -> 128 within the
    # interval to step 30, so at least 3 of its iterations overflowed; a rise is no overflow
    old = [
        rec(s, scale=sc).replace(" number of skipped iterations:   0 |", "")
        for s, sc in ((10, "1024.0"), (20, "1024.0"), (30, "128.0"), (40, "256.0"))
    ]
    # a counter that is printed is trusted; a line cut before it is not a counter
    cut = rec(60, scale="32.0").split("number of skipped")[0] + "number of skipp"
    parsed = parse_text("\n".join([*old, rec(50, scale="64.0"), cut, ""]))
    got = [(e["step"], e["count"], e["attempted_scale"], e["new_scale"]) for e in
           events(parsed, "overflow_skip")]  # fmt: skip
    assert got == [(30, 3, 1024.0, 128.0), (60, 1, 64.0, 32.0)]
    assert parsed.metrics.get_column("skipped").to_list() == [None, None, None, None, 0, None]


def test_start_up_arguments_and_a_relaunch_that_changes_them():
    from parsers import read_log

    run = read_log([Path(__file__).resolve().parents[1] / "fixtures/megatron/spike_restart.log"])
    extra = run.meta.model_extra
    assert extra["arguments"] == {
        "fp16": True,
        "global_batch_size": 256,
        "initial_loss_scale": 65536,
        "lr": 0.0003,
        "lr_decay_style": "cosine",
        "lr_warmup_iters": 20,
        "min_lr": 3e-05,
        "seq_length": 2048,
        "train_iters": 500,
    }
    assert extra["argument_changes"] == [
        {"line": 195, "key": "lr", "old": 0.0003, "new": 0.00015},
        {"line": 198, "key": "min_lr", "old": 3e-05, "new": 1.5e-05},
    ]


def test_an_argument_dump_without_its_banners_is_read_and_timer_lines_are_not():
    import polars as pl

    from parsers.megatron.arguments import read_arguments

    text = [
        "  lr .............................................. 6e-05",
        "  train_iters ..................................... 320000",
        "  rampup_batch_size ............................... ['16', '16', '6_000_000']",
        "  lr_decay_style .................................. None",
        "  forward-compute ...: 123.45",
    ]
    got = read_arguments(pl.DataFrame({"line": range(1, 6), "text": text}))
    assert got == {
        "arguments": {
            "lr": 6e-05,
            "train_iters": 320000,
            "rampup_batch_size": "['16', '16', '6_000_000']",
            "lr_decay_style": None,
        }
    }
    assert read_arguments(pl.DataFrame({"line": [1], "text": ["iteration 1/ 10 |"]})) == {}


def test_each_relaunch_dump_is_compared_with_the_one_before():
    import polars as pl

    from parsers.megatron.arguments import read_arguments

    text = []
    for lr in ("0.0003", "0.00015", "0.00015"):
        text += [
            "------------------------ arguments ------------------------",
            f"  lr .............................................. {lr}",
            "-------------------- end of arguments ---------------------",
            "  forward-compute ...: 12.5",
        ]
    got = read_arguments(pl.DataFrame({"line": range(1, len(text) + 1), "text": text}))
    assert got == {
        "arguments": {"lr": 0.0003},
        "argument_changes": [{"line": 6, "key": "lr", "old": 0.0003, "new": 0.00015}],
    }
