"""TensorBoard event files: the reader against files written by tensorboardX and PyTorch
(committed fixtures, and files written here when tensorboardX is installed)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from logbook.errors import InputError
from logbook.run import Run
from logbook.segments import order_parts, stitch
from parsers import tensorboard
from parsers.tags import columns, eval_split
from parsers.tensorboard import slow, tfrecord
from parsers.tensorboard.file import read_event_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tensorboard"
CASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def run_of(path: Path) -> Run:
    parts = order_parts(tensorboard.read_path(path))
    metrics, events = stitch(parts, [p.meta["file"] for p in parts])
    return Run(metrics=metrics, events=events)


def body(run: Run, tmp: Path) -> list[str]:
    """The metrics and event rows of the run as written (no header)."""
    out = tmp / "out.jsonl"
    run.write(out)
    rows = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    return [json.dumps(r, sort_keys=True) for r in rows]


@pytest.mark.parametrize("case", CASES)
def test_fixture_gives_its_expected_rows(case, tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    got = body(run_of(Path(case)), tmp_path)
    expected = (FIXTURES / f"{case}.expected.jsonl").read_text().splitlines()
    assert got == [json.dumps(json.loads(x), sort_keys=True) for x in expected]


def column(run: Run, name: str) -> list:
    return run.metrics.get_column(name).to_list()


def f32(x: float) -> float:
    return float(np.float32(x))


def test_pytorch_simple_values_tensors_nan_and_non_scalars(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run = run_of(Path("torch_mixed"))
    assert column(run, "step") == [0, 1, 2, 3, 4, 5]
    assert column(run, "loss")[:5] == [2.5, 2.25, 2.0, 1.75, 1.5]
    assert math.isnan(column(run, "loss")[5])
    # new_style float tensors: float32 values, widened exactly
    assert column(run, "lr") == [f32(1e-3 * (s + 1)) for s in range(5)] + [None]
    assert column(run, "grad_norm") == [None] * 5 + [0.75]  # a double tensor
    (val,) = run.events_of("validation")
    assert (val.step, val.split, val.values) == (5, "eval", {"loss": 2.25})
    assert [(e.step, e.metric, e.value) for e in run.events_of("nonfinite")] == [(5, "loss", "nan")]
    part = tensorboard.read_path(Path("torch_mixed"))[0]
    # 16 records: header, 12 scalars, double, histogram, text, eval = used 13+1 ...
    assert part.meta["lines"] == 16 and part.ignored == 3 and part.unrecognized.len() == 0
    assert "non-scalar summaries ignored (1 histograms, 1 tensors)" in part.meta["caveats"][0]


def test_add_scalars_sub_writers_join_the_records(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run = run_of(Path("tbx_add_scalars"))
    assert column(run, "step") == [1, 2, 3]
    assert column(run, "loss") == [2.5, 2.0, 1.5]  # loss/train
    assert column(run, "lr") == [0.5, 0.25, f32(0.5 / 3)]
    vals = [(e.step, e.split, e.values) for e in run.events_of("validation")]
    assert vals == [
        (1, "val", {"loss": 2.75}),
        (2, "val", {"loss": 2.25}),
        (3, "val", {"loss": 1.75}),
    ]


def test_two_event_files_are_two_launches(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run = run_of(Path("restart"))
    assert column(run, "step") == [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]
    assert column(run, "segment") == [0] * 6 + [1] * 5
    (r,) = run.events_of("restart")
    # a step that goes back to 3 (<= 10) reads as a fresh start (the stitcher's rule)
    assert (r.step, r.resume_step, r.last_step_before, r.lost_steps) == (3, 0, 5, 5)


def test_validation_directory_beside_train(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run = run_of(Path("split_dirs"))
    assert column(run, "epoch_loss") == [1.5, 1.25, 1.0]
    vals = [(e.step, e.split, e.values) for e in run.events_of("validation")]
    assert vals == [(s, "validation", {"epoch_loss": 1.75 - 0.25 * s}) for s in range(3)]


def test_cut_file_and_bad_crc_are_reported_not_fatal(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    cut = tensorboard.read_path(Path("truncated"))[0]
    assert cut.metrics.get_column("loss").to_list() == [1.0, 2.0, 3.0]
    assert cut.unrecognized.to_list() == [5] and cut.meta["lines"] == 5
    assert "ends inside a record at byte 164" in " ".join(cut.meta["caveats"])
    bad = tensorboard.read_path(Path("bad_crc"))[0]
    assert bad.metrics.get_column("step").to_list() == [0, 1, 3]
    assert bad.unrecognized.to_list() == [4]
    assert "1 record(s) failed their CRC" in bad.meta["caveats"][0]


def test_hugging_face_event_file(monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run = run_of(Path("hf_trainer"))
    assert column(run, "step") == [2, 4, 6, 8, 10, 12]
    assert column(run, "tokens") == [128, 256, 384, 512, 640, 768]
    assert column(run, "epoch") == [0.125, 0.25, 0.375, 0.5, 0.625, 0.75]
    assert [e.step for e in run.events_of("validation")] == [4, 8, 12]
    assert (
        "train_runtime" in run.metrics.columns and "train_train_runtime" not in run.metrics.columns
    )


def test_every_record_is_accounted_for():
    for case in CASES:
        for part in tensorboard.read_path(FIXTURES / case):
            used = part.meta["records_used"]
            total = used + part.ignored + part.unrecognized.len()
            assert total == part.meta["lines"], case
            assert used >= part.metrics.height


def test_sniff_path():
    assert tensorboard.sniff_path(FIXTURES / "restart") == 80
    f = next((FIXTURES / "restart").iterdir())
    assert tensorboard.sniff_path(f) == 95
    assert tensorboard.sniff_path(FIXTURES / "make_fixtures.py") == 0
    assert tensorboard.sniff(["iter 1: loss 2.0"]) == 0


def _copy(src: Path, dest: Path) -> None:
    for f in src.rglob("*tfevents*"):
        target = dest / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.read_bytes())


def test_runs_one_after_another_are_launches_of_one_run(tmp_path):
    _copy(FIXTURES / "restart", tmp_path / "logs" / "a")
    _copy(FIXTURES / "split_dirs", tmp_path / "logs" / "b")
    # a/ (two launches) then b/train (later): three launches; b/validation evaluates b/train
    parts = tensorboard.read_path(tmp_path / "logs")
    assert [p.metrics.height for p in parts] == [6, 5, 3]
    assert [len(p.events) for p in parts] == [0, 0, 3]
    assert (
        "2 TensorBoard run directories read as launches of one run" in parts[0].meta["caveats"][0]
    )


def test_runs_written_at_the_same_time_are_refused(tmp_path):
    with pytest.raises(InputError, match="no TensorBoard event files"):
        tensorboard.read_path(tmp_path)
    _copy(FIXTURES / "restart", tmp_path / "sweep" / "a")
    _copy(FIXTURES / "restart", tmp_path / "sweep" / "b")
    with pytest.raises(InputError, match=r"written at the same time \(a, b\): give one run"):
        tensorboard.read_path(tmp_path / "sweep")


# ---- the reader's pieces -------------------------------------------------------------


def _crc(b: bytes) -> bytes:
    return struct.pack("<I", int(tfrecord.mask(np.array([tfrecord.crc32c_bytes(b)]))[0]))


def _frame(body: bytes) -> bytes:
    head = struct.pack("<Q", len(body))
    return head + _crc(head) + body + _crc(body)


def test_crc32c_matches_the_standard_check_value():
    data = np.frombuffer(b"123456789" * 300, np.uint8)
    starts = np.arange(0, 9 * 300, 9)
    assert tfrecord.crc32c_bytes(b"123456789") == 0xE3069283
    assert set(tfrecord.crc32c(data, starts, np.full(300, 9)).tolist()) == {0xE3069283}
    odd = np.arange(0, 2000, 7)
    lens = (odd % 13) + 1
    want = [
        tfrecord.crc32c_bytes(data[s : s + n].tobytes()) for s, n in zip(odd, lens, strict=True)
    ]
    assert tfrecord.crc32c(data, odd, lens).tolist() == want


def test_many_values_in_one_summary_and_repeated_fields(tmp_path):
    """A TF1 merged summary (two values in one event) goes the one-by-one way."""

    def value(tag: bytes, x: float) -> bytes:
        v = b"\x0a" + bytes([len(tag)]) + tag + b"\x15" + struct.pack("<f", x)
        return b"\x0a" + bytes([len(v)]) + v

    summary = value(b"loss", 1.5) + value(b"lr", 0.25)
    event = (
        b"\x09" + struct.pack("<d", 1.7e9) + b"\x10\x07" + b"\x2a" + bytes([len(summary)]) + summary
    )
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(
        _frame(b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x0dbrain.Event:2") + _frame(event)
    )
    ef = read_event_file(f)
    got = sorted(
        (ef.points.tags[t], int(s), v)
        for t, s, v in zip(ef.points.tag, ef.points.step, ef.points.value, strict=True)
    )
    assert got == [("loss", 7, 1.5), ("lr", 7, 0.25)]
    assert ef.ignored == 1 and ef.bad.size == 0
    assert slow.decode_event(event)[1] == 7


def test_periodic_framing_survives_a_change_of_record_size(tmp_path):
    """Thousands of records (read by prediction), a step varint that grows from 1 to 2
    bytes at 128, and an odd record in the middle."""

    def event(step: int, tag: bytes, x: float) -> bytes:
        v = b"\x0a" + bytes([len(tag)]) + tag + b"\x15" + struct.pack("<f", x)
        s = b"\x0a" + bytes([len(v)]) + v
        varint = bytes([step]) if step < 128 else bytes([(step & 0x7F) | 0x80, step >> 7])
        return (
            b"\x09"
            + struct.pack("<d", 1.7e9 + step)
            + b"\x10"
            + varint
            + b"\x2a"
            + bytes([len(s)])
            + s
        )

    records = []
    for s in range(1, 3000):
        records.append(_frame(event(s, b"loss", s / 1000)))
        records.append(_frame(event(s, b"grad_norm", 1.0)))
        if s == 1500:
            records.append(_frame(b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x03xyz"))
    f = tmp_path / "events.out.tfevents.2.host"
    f.write_bytes(b"".join(records))
    ef = read_event_file(f)
    assert ef.records == 2 * 2999 + 1 and ef.ignored == 1
    loss = ef.points.value[ef.points.tag == ef.points.tags.index("loss")]
    assert np.array_equal(loss, np.float32(np.arange(1, 3000) / 1000).astype(np.float64))


def test_tag_names_and_evaluation_words():
    cols = columns(["train/loss", "loss", "train/epoch", "lr-AdamW", "Loss/val", "step"])
    assert cols["loss"] == "loss" and cols["train/loss"] == "loss_value"
    assert cols["train/epoch"] == "epoch" and cols["lr-AdamW"] == "lr"
    assert cols["step"] == "step_value"
    assert [eval_split(t) for t in ("eval/loss", "lm loss validation", "interval", "Loss/val")] == [
        "eval",
        "validation",
        None,
        "val",
    ]


def test_written_here_with_tensorboardx_keeps_every_point(tmp_path):
    tbx = pytest.importorskip("tensorboardX", reason="tensorboardX not installed")
    w = tbx.SummaryWriter(str(tmp_path))
    for s in range(20_000):  # twice TensorBoard's default reservoir of 10,000
        w.add_scalar("train/loss", 1.0 + (s % 7) / 8, s)
    w.close()
    part = tensorboard.read_path(tmp_path)[0]
    assert part.metrics.height == 20_000
    assert part.metrics.get_column("loss").to_list() == [1.0 + (s % 7) / 8 for s in range(20_000)]
