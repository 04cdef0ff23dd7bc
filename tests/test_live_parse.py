"""Reading a log piece by piece as it grows reads what ``logbook parse`` reads whole."""

from __future__ import annotations

import os
import random
from pathlib import Path

import polars as pl
import pytest

import logbook.live.stream as stream
from logbook.errors import InputError
from logbook.live.detector import LiveDetector
from logbook.live.follow import Follower
from logbook.live.stream import LiveSource, live_run
from logbook.run import Run
from parsers import read_log

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
# one or more logs of each text format a run writes as it trains
LOGS = [
    "megatron/spike_restart.log",
    "megatron/crash_restarts.log",
    "megatron/torchrun_ranks.log",
    "megatron/tr8b_overflow_resume.log",
    "metaseq/corpus_pr314_startup_oom.log",
    "fairseq-simple/legacy_pipes.log",
    "fairseq-simple/modern_crlf.log",
    "nanogpt/shakespeare_char.log",
    "torchtitan/llama3_debug.log",
    "jsonl/messy_crlf.jsonl",
    "jsonl/nonfinite_nested.jsonl",
    "lightning/metrics.csv",
    "text/hf_dicts_logging_steps.log",
    "text/rank_copies.log",
    "text/tqdm_redraws.log",
    "text/crash_restart.log",
]
COLUMNS = ["step", "loss", "segment"]


def _present(names: list[str]) -> list[str]:
    return [n for n in names if (FIX / n).exists()]


def grow(path: Path, raw: bytes, src: LiveSource, seed: int, most: int) -> None:
    """Append ``raw`` to ``path`` in random pieces (cut anywhere, lines too), polling
    after each."""
    rng = random.Random(seed)
    pos = 0
    with path.open("ab") as fh:
        while pos < len(raw):
            n = rng.randint(1, most)
            fh.write(raw[pos : pos + n])
            fh.flush()
            pos += n
            src.poll()
    src.poll()
    src.finish()


def _columns(run: Run) -> pl.DataFrame:
    return run.metrics.select(c for c in COLUMNS if c in run.metrics.columns)


def test_the_logs_named_here_exist():
    assert _present(LOGS) == LOGS


@pytest.mark.parametrize("name", _present(LOGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_short_log_grown_in_pieces_reads_as_it_does_whole(tmp_path, name, seed):
    src_path = FIX / name
    raw = src_path.read_bytes()
    log = tmp_path / src_path.name
    log.write_bytes(b"")
    src = LiveSource(log)
    grow(log, raw, src, seed, max(2, len(raw) // 8))
    whole = read_log(src_path)
    live = live_run([src.parser])
    if whole.metrics.height == 0:
        assert live.metrics.height == 0
        return
    assert _columns(live).equals(_columns(whole))
    assert src.parser.fmt == whole.meta.format


@pytest.mark.parametrize(
    "name",
    _present(["megatron/spike_restart.log", "jsonl/aliases.jsonl", "nanogpt/shakespeare_char.log"]),
)
def test_a_long_log_read_piece_by_piece_reads_as_it_does_whole(tmp_path, name, monkeypatch):
    """Past WHOLE_LINES lines each piece is parsed alone, after the file's first lines
    that are not records: the same records, the same restarts."""
    monkeypatch.setattr(stream, "WHOLE_LINES", 2)
    raw = (FIX / name).read_bytes()
    log = tmp_path / "grown.log"
    log.write_bytes(b"")
    src = LiveSource(log)
    grow(log, raw, src, 3, max(2, len(raw) // 6))
    assert src.parser._whole is None  # it did read piece by piece
    assert _columns(live_run([src.parser])).equals(_columns(read_log(FIX / name)))


def test_numbered_records_go_on_from_the_records_before(tmp_path, monkeypatch):
    """A Trainer's printed dicts have no step: numbered 1, 2, 3 ... across pieces."""
    monkeypatch.setattr(stream, "WHOLE_LINES", 3)
    log = tmp_path / "stdout.log"
    log.write_bytes(b"")
    src = LiveSource(log)
    lines = [
        f"{{'loss': {2.0 - i / 100:.4f}, 'learning_rate': 5e-05, 'epoch': {i / 100}}}\n"
        for i in range(1, 13)
    ]
    grow(log, "".join(lines).encode(), src, 5, 120)
    m = live_run([src.parser]).metrics
    assert m.get_column("step").to_list() == list(range(1, 13))
    assert m.get_column("loss").to_list() == [round(2.0 - i / 100, 4) for i in range(1, 13)]


def test_a_line_written_in_two_goes_waits_for_its_end(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"first line\nsecond ha")
    f = Follower(log)
    got = f.read()
    assert got.to_dicts() == [{"line": 1, "text": "first line"}]
    assert f.read() is None
    with log.open("ab") as fh:
        fh.write(b"lf\r\nthird\r")
    got = f.read()
    assert got.to_dicts() == [{"line": 2, "text": "second half"}]  # the CR may be CR LF
    with log.open("ab") as fh:
        fh.write(b"fourth\rfifth")  # a lone CR is a break
    assert f.read().get_column("text").to_list() == ["third", "fourth"]
    assert f.flush().to_dicts() == [{"line": 5, "text": "fifth"}]


def test_a_rotated_file_is_read_to_its_end_then_the_new_one_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"a 1\na 2\na 3 cut")
    f = Follower(log)
    assert f.read().get_column("text").to_list() == ["a 1", "a 2"]
    os.rename(log, tmp_path / "train.log.1")
    assert f.read() is None  # renamed away, nothing new yet: the old one still read
    with (tmp_path / "train.log.1").open("ab") as fh:
        fh.write(b" late")  # the writer still had the old file open
    log.write_bytes(b"b 1\nb 2 cut")
    got = f.read()
    assert got.to_dicts() == [
        {"line": 3, "text": "a 3 cut late"},
        {"line": 4, "text": "b 1"},
    ]
    assert f.rotations == 1


def test_a_file_written_again_from_its_start_is_read_again(tmp_path):
    """A CSV logger saving all its rows again: the records are not counted twice."""
    log = tmp_path / "metrics.csv"
    rows = ["step,loss,lr"] + [f"{s},{3 - s / 100:.3f},0.001" for s in range(1, 21)]
    log.write_text("\n".join(rows[:11]) + "\n")
    src = LiveSource(log)
    src.poll()
    log.write_text("\n".join(rows) + "\n")  # rewritten in place, longer
    src.poll()
    m = live_run([src.parser]).metrics
    assert m.get_column("step").to_list() == list(range(1, 21))


def test_a_file_truncated_after_a_copy_keeps_what_was_read(tmp_path):
    """``copytruncate``: the lines already read stay, the new ones follow."""
    log = tmp_path / "train.jsonl"
    log.write_text("".join(f'{{"step": {s}, "loss": 2.5}}\n' for s in range(1, 6)))
    src = LiveSource(log)
    src.poll()
    log.write_text('{"step": 6, "loss": 2.4}\n')
    src.poll()
    m = live_run([src.parser]).metrics
    assert m.get_column("step").to_list() == [1, 2, 3, 4, 5, 6]


def test_a_file_that_is_no_text_log_is_refused(tmp_path):
    log = tmp_path / "x.log.gz"
    log.write_bytes(b"\x1f\x8b\x08\x00binary")
    with pytest.raises(InputError, match="compressed file cannot be followed"):
        LiveSource(log).poll()


def test_records_fed_one_by_one_report_the_precursor_then_the_spike_once():
    rows = Run.read(FIX / "detect/spike_precursor.jsonl").metrics
    det = LiveDetector()
    got: list[tuple[int, str, str]] = []
    cols = rows.select("step", "loss", "lr", "grad_norm")
    assert det.feed_frame(cols.head(600)) == []  # a healthy start, at once
    for r in cols.slice(600).iter_rows(named=True):
        for f in det.feed(r):
            got.append((r["step"], f.kind, f.evidence["live"]))
    got += [(-1, f.kind, f.evidence["live"]) for f in det.flush()]
    assert [(k, why) for _, k, why in got] == [
        ("grad_norm_drift", "precursor"),
        ("loss_spike", "complete"),
    ]
    fed_at = {k: s for s, k, _ in got}
    assert fed_at["grad_norm_drift"] < 700  # before the spike's first record
    assert fed_at["loss_spike"] == 708  # the record after its last
    assert det.findings[1].start_step == 700 and det.findings[1].end_step == 707


def test_an_open_finding_is_reported_when_the_run_ends():
    rows = Run.read(FIX / "detect/spike_precursor.jsonl").metrics.filter(pl.col("step") <= 704)
    det = LiveDetector(check_every=50)
    det.feed_frame(rows.select("step", "loss", "grad_norm").to_pandas())
    end = det.flush()
    assert [(f.kind, f.evidence["live"]) for f in end] == [("loss_spike", "at end")]
