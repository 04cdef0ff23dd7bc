"""Megatron-family launches, crashes and restarts as stitched into a run; bad input."""

from __future__ import annotations

import subprocess
import sys

from _rows import events_of as events
from _rows import files_run as run_of

import parsers
from logbook.schema import event_to_dict
from logbook.segments import order_parts, stitch
from logbook.textio import split_lines
from parsers import megatron

REC = (
    " iteration {step:8d}/    1000 | consumed samples: {samples:12d} | elapsed time per "
    "iteration (ms): 1500.0 | learning rate: 1.000E-04 | global batch size:    32 | "
    "lm loss: 2.500000E+00 | loss scale: {scale} | grad norm: 1.500 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)
BANNER = (
    "using world size: 8, data-parallel-size: 8, tensor-model-parallel size: 1, "
    "pipeline-model-parallel size: 1 \n> initializing torch distributed ...\n"
)
NCCL = (
    "[E ProcessGroupNCCL.cpp:475] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1800571 milliseconds before timing out.\n"
)


def recs(*steps: int, scale: str = "1024.0") -> str:
    return "".join(REC.format(step=s, samples=32 * s, scale=scale) + "\n" for s in steps)


def segments(run) -> list[tuple[int, int]]:
    return run.metrics.select("step", "segment").rows()


def test_crash_then_restart_from_a_checkpoint(tmp_path):
    load = " loading checkpoint from /ckpt at iteration 2\n"
    run = run_of(tmp_path, recs(1, 2, 3) + NCCL + BANNER + load + recs(3, 4))
    assert segments(run) == [(1, 0), (2, 0), (3, 0), (3, 1), (4, 1)]
    assert events(run, "restart") == [
        {
            "kind": "restart",
            "step": 3,
            "segment": 1,
            "resume_step": 2,
            "last_step_before": 3,
            "lost_steps": 1,
            "cause": "nccl_timeout",
        }
    ]
    assert events(run, "hardware_failure") == [
        {
            "kind": "hardware_failure",
            "step": 3,
            "segment": 0,
            "step_source": "record",
            "cause": "nccl_timeout",
        }
    ]


def test_a_launch_printed_by_many_ranks_is_one_restart(tmp_path):
    launch = BANNER * 8 + " loading checkpoint from /ckpt at iteration 2\n" * 8
    run = run_of(tmp_path, recs(1, 2, 3) + launch + recs(3))
    assert [(e["step"], e["resume_step"]) for e in events(run, "restart")] == [(3, 2)]


def test_a_step_that_goes_back_opens_a_segment(tmp_path):
    run = run_of(tmp_path, recs(100, 110, 120, 105, 115, 2, 3))
    assert segments(run) == [(100, 0), (110, 0), (120, 0), (105, 1), (115, 1), (2, 2), (3, 2)]
    got = [(e["step"], e["resume_step"], e["lost_steps"]) for e in events(run, "restart")]
    assert got == [(105, 104, 16), (2, 0, 115)]


def test_the_first_launch_is_a_restart_only_when_it_resumes(tmp_path):
    fresh = BANNER + "WARNING: could not find the metadata file /ckpt/latest.txt \n"
    assert events(run_of(tmp_path, fresh + recs(1, 2)), "restart") == []
    resumed = BANNER + "  successfully loaded checkpoint from /ckpt [ t 0, p 0 ] at iteration 50\n"
    assert events(run_of(tmp_path, resumed + recs(51)), "restart") == [
        {"kind": "restart", "step": 51, "segment": 0, "resume_step": 50}
    ]


def test_a_launch_that_died_before_training_is_a_restart_too(tmp_path):
    ecc = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    oom = "RuntimeError: CUDA error: out of memory\n"
    run = run_of(tmp_path, recs(1) + ecc + BANNER + oom)
    assert events(run, "restart") == [
        {"kind": "restart", "segment": 1, "last_step_before": 1, "cause": "ecc"}
    ]
    got = [(e["segment"], e["cause"]) for e in events(run, "hardware_failure")]
    assert got == [(0, "ecc"), (1, "oom")]


def test_each_file_is_a_launch():
    parts = [megatron.parse(split_lines(t.encode())[0], n) for t, n in ((recs(130, 140), "b"),)]
    parts.insert(0, megatron.parse(split_lines(recs(100, 110, 120).encode())[0], "a"))
    ordered = order_parts(parts[::-1])
    assert [p.metrics.get_column("step")[0] for p in ordered] == [100, 130]
    metrics, evs = stitch(ordered, ["a", "b"])
    assert metrics.select("step", "segment", "source").rows() == [
        (100, 0, 0),
        (110, 0, 0),
        (120, 0, 0),
        (130, 1, 1),
        (140, 1, 1),
    ]
    assert [event_to_dict(e) for e in evs] == [
        {
            "kind": "restart",
            "step": 130,
            "segment": 1,
            "source": {"file": "b", "line": 1},
            "text": "next log file: b",
            "resume_step": 129,
            "last_step_before": 120,
            "lost_steps": 0,
        }
    ]


def test_loss_scale_changes_are_not_read_across_a_fresh_start(tmp_path):
    sep = "# ---- (next pasted block) ----\n"
    run = run_of(tmp_path, recs(1, 2, scale="4096.0") + sep + recs(2, scale="1.0"))
    assert events(run, "loss_scale_change") == []
    load = " loading checkpoint from /ckpt at iteration 2\n"
    run = run_of(tmp_path, recs(1, 2, 3) + BANNER + load + recs(3, scale="65536.0"))
    assert events(run, "loss_scale_change") == [
        {"kind": "loss_scale_change", "step": 3, "segment": 1, "old": 1024.0, "new": 65536.0}
    ]


def test_a_pasted_block_separator_counts_only_when_training_follows(tmp_path):
    sep = "# ---- (next pasted block) ----\n"
    run = run_of(tmp_path, recs(1, 2) + sep + "Traceback (most recent call last):\n")
    assert events(run, "restart") == []
    assert run.meta.parse[0].ignored == 1
    run = run_of(tmp_path, recs(1, 2) + sep + recs(500))
    assert [(e["step"], e["resume_step"]) for e in events(run, "restart")] == [(500, 499)]


def test_events_belong_to_the_launch_they_follow(tmp_path):
    valid = " validation loss at iteration 4 | lm loss value: 2.4E+00 | lm loss PPL: 1.1E+01 |\n"
    run = run_of(tmp_path, recs(1, 2, 3) + BANNER + recs(1, 2, 3, 4) + valid)
    got = [(e.kind, e.segment, e.step) for e in run.events]
    assert got == [("restart", 1, 1), ("validation", 1, 4)]


# ---- bad input -------------------------------------------------------------------------


def test_crlf_line_endings_read_like_lf(tmp_path):
    text = BANNER + recs(1, 2) + NCCL
    a = tmp_path / "lf.log"
    b = tmp_path / "crlf.log"
    a.write_bytes(text.encode())
    b.write_bytes(text.replace("\n", "\r\n").encode())
    ra, rb = parsers.read_log(a), parsers.read_log(b)
    assert ra.metrics.drop("source").equals(rb.metrics.drop("source"))
    assert [e.kind for e in ra.events] == [e.kind for e in rb.events] == ["hardware_failure"]


def test_invalid_utf8_bytes_do_not_stop_the_parse(tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(recs(1).encode() + b"garbage \xff\xfe line\n" + recs(2).encode())
    run = parsers.read_log(p)
    assert run.metrics.get_column("step").to_list() == [1, 2]
    assert run.meta.parse[0].invalid_utf8_lines == 1
    assert run.meta.parse[0].first_unrecognized == [2]


def test_a_truncated_last_record_keeps_only_its_complete_fields():
    whole = REC.format(step=9, samples=288, scale="1024.0")
    cut = whole[: whole.index("learning rate: 1.0") + len("learning rate: 1.0")]
    lines, _ = split_lines((recs(8) + cut).encode())
    parsed = megatron.parse(lines, "x.log")
    row = parsed.metrics.filter(parsed.metrics["step"] == 9).to_dicts()[0]
    assert (row["samples"], row["step_time_s"], row["lr"], row["loss"]) == (288, 1.5, None, None)
    assert [e.kind for e in parsed.events] == []


def test_a_file_of_noise_only_parses_to_no_records(tmp_path):
    p = tmp_path / "noise.log"
    p.write_text(
        "node-a:1933:1955 [3] NCCL INFO Channel 02/32 :    0   1   2   3\n"
        "[Rank 3] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0\n"
        "time (ms) | forward-compute: 4012.33 | backward-compute: 8123.91\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "logbook.cli", "parse", str(p), "--format", "megatron"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "megatron: 0 records, 0 segment(s)"


def test_sniff_scores():
    assert megatron.sniff(["noise", recs(1)]) == 90
    assert megatron.sniff(["> initializing torch distributed ..."]) == 30
    assert megatron.sniff(["[default3]:terminate called after throwing an instance of"]) == 5
    assert megatron.sniff(["dear diary", "the loss went up"]) == 0
