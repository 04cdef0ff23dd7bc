"""``attach_notes``: chronicle events placed on a metric log's steps."""

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from logbook.errors import InputError, UsageError
from logbook.run import Run, RunMeta
from logbook.schema import CheckpointSave
from parsers.chronicle.notes import attach_notes, read_notes

T0 = datetime(2023, 3, 5, tzinfo=UTC)


def metric_run() -> Run:
    # steps 10, 20, 30 hourly; a crash, then a relaunch from step 20 at 05:00
    steps = [10, 20, 30, 21, 31]
    hours = [0, 1, 2, 5, 6]
    metrics = pl.DataFrame(
        {
            "step": steps,
            "segment": [0, 0, 0, 1, 1],
            "time": [T0 + timedelta(hours=h) for h in hours],
            "line": [1, 2, 3, 4, 5],
            "loss": [3.0, 2.9, 2.8, 2.85, 2.7],
        }
    )
    saved = CheckpointSave(step=20, segment=0, path="ckpt/20")
    return Run(metrics=metrics, events=[saved], meta=RunMeta(name="r", sources=["train.log"]))


NOTES = """\
At iteration 25 we switched clip from 2.0 to 1.0.
2023-03-05 01:30 UTC: Run 1.1 lowered LR by 10%
2023-03-05 04:00 UTC: 1.2 restart from step 20 after an ECC error
2023-03-05 06:30: NCCL timeout on node 7
2023-03-04 23:00 UTC: warming up the cluster
2023-03-07 09:00 UTC: cluster deleted
"""


def by_line(run: Run, file: str) -> dict[int, dict]:
    """line -> kind -> event, for the events read from ``file``."""
    out: dict[int, dict] = {}
    for e in run.events:
        if e.source and e.source.file == file:
            assert e.kind not in out.get(e.source.line, {})
            out.setdefault(e.source.line, {})[e.kind] = e
    return out


def test_events_placed_by_time_or_by_their_stated_step(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    run = attach_notes(metric_run(), [notes])
    got = by_line(run, str(notes))
    assert {line: sorted(kinds) for line, kinds in got.items()} == {
        1: ["config_change"],
        2: ["lr_change", "restart"],  # the first entry of run 1.1 is its launch
        3: ["hardware_failure", "restart"],
        4: ["hardware_failure"],
    }
    clip = got[1]["config_change"]
    assert (clip.kind, clip.key, clip.old, clip.new) == ("config_change", "clip_grad", 2.0, 1.0)
    assert (clip.step, clip.step_source, clip.segment, clip.time) == (25, "text", 1, None)
    lr, launch = got[2]["lr_change"], got[2]["restart"]
    assert (launch.kind, launch.step, launch.step_source, launch.segment) == (
        "restart",
        20,
        "time",
        0,
    )
    assert (lr.kind, lr.step, lr.step_source, lr.segment, lr.run) == (
        "lr_change",
        20,
        "time",
        0,
        "1.1",
    )
    restart, ecc = got[3]["restart"], got[3]["hardware_failure"]
    assert (restart.kind, restart.resume_step, restart.step, restart.step_source) == (
        "restart",
        20,
        20,
        "text",
    )
    assert restart.segment == 1  # written in the gap: it opens the next segment
    assert (ecc.kind, ecc.cause, ecc.step, ecc.step_source, ecc.segment) == (
        "hardware_failure",
        "ecc",
        30,
        "time",
        0,
    )
    nccl = got[4]["hardware_failure"]
    assert (nccl.cause, nccl.node, nccl.step, nccl.segment, nccl.assumed_tz) == (
        "nccl",
        "7",
        31,
        1,
        "UTC",
    )
    # before the log's first record and after its last: set apart, off the timeline
    early, late = run.meta.unplaced_notes
    assert (early["kind"], early.get("step"), early["source"]["line"]) == ("note", None, 5)
    assert (late["kind"], late.get("step"), late["source"]["line"]) == ("hardware_failure", None, 6)
    assert run.metrics.equals(metric_run().metrics)
    assert [e.kind for e in run.events if e.source is None] == ["checkpoint_save"]


def test_meta_records_the_notes(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    run = attach_notes(metric_run(), [notes])
    assert run.meta.sources == ["train.log", str(notes)]
    assert [(s.file, s.format, s.lines, s.records) for s in run.meta.parse] == [
        (str(notes), "chronicle", 6, 0)
    ]
    assert run.meta.lineage == {"1.2": "1.1"}
    assert run.meta.caveats == [
        f"{notes}: 1 event time(s) written without a zone, read as UTC (set --tz)",
        "2 chronicle event(s) fall outside the metric log's time span: no step",
        "2 chronicle event(s) not on the log's steps 10..31 (no step, or outside them): "
        "listed apart, not on the timeline",
    ]
    out = tmp_path / "run.jsonl"
    run.write(out)
    back = Run.read(out)
    assert back.meta.lineage == {"1.2": "1.1"}
    assert [e.model_dump() for e in back.events] == [e.model_dump() for e in run.events]


def test_default_zone_for_times_without_one(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("2023-03-05 01:30: lowered LR by 10%\n")
    (lr,) = [e for e in attach_notes(metric_run(), [notes], tz="Europe/Paris").events if e.source]
    assert (lr.time, lr.assumed_tz, lr.step) == (
        datetime(2023, 3, 5, 0, 30, tzinfo=UTC),
        "Europe/Paris",
        10,
    )
    with pytest.raises(UsageError, match="unknown time zone 'Nowhere'"):
        attach_notes(metric_run(), [notes], tz="Nowhere")


def test_no_notes_is_the_same_run():
    run = metric_run()
    assert attach_notes(run, []) is run


def test_log_without_times_leaves_time_only_events_unplaced(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("2023-03-05 01:30 UTC: lowered LR by 10%\n")
    bare = Run(metrics=metric_run().metrics.drop("time"))
    run = attach_notes(bare, [notes])
    assert run.events == []
    (lr,) = run.meta.unplaced_notes
    assert (lr["kind"], lr.get("step"), lr["time"]) == ("lr_change", None, "2023-03-05T01:30:00Z")


def test_notes_outside_the_log_and_told_twice(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text(
        "2023-03-04 20:00 UTC: restart from step 5\n"  # before the log's first step (10)
        "2023-03-05 04:00 UTC: restart from step 20\n"
        "2023-03-05 04:10 UTC: the restart from step 20 is running\n"
    )
    run = attach_notes(metric_run(), [notes])
    kept = [(e.kind, e.step, e.source.line) for e in run.events if e.source]
    assert kept == [("restart", 20, 2)]
    assert [(n["kind"], n["step"]) for n in run.meta.unplaced_notes] == [("restart", 5)]
    assert run.meta.caveats[-1] == "1 chronicle restart(s) told twice: kept once"


def test_binary_notes_file_is_refused(tmp_path):
    notes = tmp_path / "notes.pdf"
    notes.write_bytes(b"%PDF-1.4\n\x00\x01\x02")
    with pytest.raises(InputError, match="not a text log"):
        attach_notes(metric_run(), [notes])


def test_chronicle_as_a_run_of_its_own(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("2023-03-05 9:00am: Run 4.1\n2023-03-05 11:00am: 4.1 lr 3e-5\n")
    run = read_notes([notes], tz="PT")
    assert run.meta.format == "chronicle"
    assert [(e.kind, e.time, e.assumed_tz) for e in run.events] == [
        ("restart", datetime(2023, 3, 5, 17, tzinfo=UTC), "PT"),
        ("lr_change", datetime(2023, 3, 5, 19, tzinfo=UTC), "PT"),
    ]
    assert run.events[1].new == 3e-5
