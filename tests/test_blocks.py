"""A large log read in blocks: the blocks' lines are the file's lines, and every format
read line by line parses a file in blocks exactly as it parses it whole."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from bench._mutations import N_OPS, SEEDS, mutate, seed_bytes
from logbook import blocks
from logbook.blocks import LineBlocks
from logbook.errors import InputError, LogbookError
from logbook.textio import read_lines
from parsers import FORMATS, parse_file, sniff

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1, 2, 3, 7, 64)


def _write(tmp_path: Path, data: bytes, gz: bool = False) -> Path:
    path = tmp_path / ("x.log.gz" if gz else "x.log")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _same_as_whole(path: Path, size: int) -> None:
    whole, stats = read_lines(path)
    got = LineBlocks(path, size)
    frame = pl.concat(list(got))
    assert_frame_equal(frame, whole)
    assert got.stats == stats


@pytest.mark.parametrize(
    "data",
    [
        b"one\ntwo\nthree\n",
        b"no final break\nlast",
        b"crlf\r\npairs\r\nonly\r\n",
        b"old\rmac\rfile\r",
        b"mixed\r\ncr\rand\nlf\r\n\r\r\n",
        b"bad \xff utf-8\nfine\nmore \xc3\n",
        b"\r\n\r\nx\n\n",
        b"a" * 50 + b"\n" + b"b" * 3,
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_blocks_hold_the_lines_of_the_file(tmp_path, data, gz):
    path = _write(tmp_path, data, gz)
    for size in SIZES:
        _same_as_whole(path, size)


def test_blocks_of_random_bytes_hold_the_lines_of_the_file(tmp_path):
    rng = random.Random(5)
    pieces = [b"a", b"bb", b"\r", b"\n", b"\r\n", b"\xff", b"\xc3\xa9", b" x=1 ", b"\xc3", b"  "]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 60)))
        if not data.strip():
            continue
        path = _write(tmp_path, data, gz=rng.random() < 0.5)
        for size in (1, 2, 5):
            _same_as_whole(path, size)


def test_blocks_are_numbered_over_the_file_and_can_be_read_again(tmp_path):
    path = _write(tmp_path, b"".join(b"line %d\n" % i for i in range(1, 101)))
    got = LineBlocks(path, 64)
    first = [f.get_column("line").to_list() for f in got]
    assert len(first) > 1
    assert [n for part in first for n in part] == list(range(1, 101))
    assert [f.get_column("line").to_list() for f in got] == first
    assert got.stats.lines == 100


def test_a_line_longer_than_a_block_stays_one_line(tmp_path):
    path = _write(tmp_path, b"short\n" + b"x" * 1000 + b"\nend\n")
    frames = list(LineBlocks(path, 16))
    texts = pl.concat(frames).get_column("text").to_list()
    assert texts == ["short", "x" * 1000, "end"]


def test_empty_and_binary_files_are_refused_in_one_line(tmp_path):
    path = _write(tmp_path, b"  \n\n \r\n")
    with pytest.raises(InputError, match=r"x\.log: file is empty$"):
        list(LineBlocks(path, 2))
    path = _write(tmp_path, b"ok\n\x00binary\n")
    with pytest.raises(InputError, match=r"not a text log \(binary data at byte 3\)"):
        list(LineBlocks(path, 2))


def test_a_damaged_gzip_is_one_line_error(tmp_path):
    path = tmp_path / "x.log.gz"
    data = b"".join(b"step %d loss %f\n" % (i, 1 / i) for i in range(1, 2000))
    path.write_bytes(gzip.compress(data)[:2000])
    message = r"x\.log\.gz: damaged gzip file \(Compressed file ended before the end-of-stream"
    with pytest.raises(InputError, match=message):
        read_lines(path)
    with pytest.raises(InputError, match=message):
        list(LineBlocks(path, 64))


def test_only_large_files_stream(tmp_path, monkeypatch):
    path = _write(tmp_path, b"x\n" * 100)
    assert not blocks.streamable(path)
    monkeypatch.setattr(blocks, "STREAM_MIN", 200)
    assert blocks.streamable(path)
    gz = _write(tmp_path, b"x\n" * 1000, gz=True)
    assert gz.stat().st_size >= 200 // 8
    assert blocks.streamable(gz)
    assert not blocks.streamable(tmp_path / "missing.log")


def _streaming_fixtures() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if not path.is_file() or path.suffix in (".json", ".md", ".py", ".parquet", ".csv"):
            continue
        try:
            fmt = sniff(path)
        except LogbookError:
            continue
        if getattr(FORMATS[fmt], "STREAMS", False):
            out.append((str(path.relative_to(ROOT)), fmt))
    return out


STREAMING = _streaming_fixtures()
SHORT_LINES = 300  # files read a line per block too


def _parsed(path: Path, fmt: str):
    parsed, stats = parse_file(path, fmt)
    events = [e.model_dump_json() for e in parsed.events]
    return parsed, stats, events


def test_every_line_by_line_format_has_fixtures():
    formats = {fmt for _, fmt in STREAMING}
    assert {"text", "nemo", "mmengine", "dllogger", "llama2c", "mlx-lm", "olmo"} <= formats
    assert len(STREAMING) >= 60


@pytest.mark.parametrize(("name", "fmt"), STREAMING, ids=[n for n, _ in STREAMING])
def test_a_file_in_blocks_parses_as_the_whole_file(name, fmt, monkeypatch):
    path = ROOT / name
    monkeypatch.setattr(blocks, "STREAM_MIN", 1 << 40)
    whole, whole_stats, whole_events = _parsed(path, fmt)
    monkeypatch.setattr(blocks, "STREAM_MIN", 0)
    # a block per line on short files (and blocks of several); on long ones, blocks of
    # one to a few lines
    sizes = (1, 4096) if whole_stats.lines <= SHORT_LINES else (997, 4096)
    for size in sizes:
        monkeypatch.setattr(blocks, "BLOCK_BYTES", size)
        got, stats, events = _parsed(path, fmt)
        # (the same columns; their order follows the blocks the shapes first show in)
        assert_frame_equal(got.metrics, whole.metrics, check_column_order=False)
        assert events == whole_events
        assert got.unrecognized.to_list() == whole.unrecognized.to_list()
        assert (got.ignored, got.meta, stats) == (whole.ignored, whole.meta, whole_stats)


def test_bars_glued_in_a_later_block_only_are_split_as_in_the_whole_file(tmp_path, monkeypatch):
    # a bar after other text on an early line is split off only where bars are glued
    # somewhere in the file: here in a later block
    early = "checking 50%|##| 5/10 [00:01<00:01, 1.0it/s]\n"
    head = early + "".join(f"step {i} | loss {3 - i / 100:.4f} | lr 1e-4\n" for i in range(1, 41))
    glued = "".join(f" {p}%|##| {p}/100 [00:0{p % 10}<00:10, 1.0it/s, loss=2.{p}]" for p in (5, 6))
    tail = "".join(f"step {i} | loss {3 - i / 100:.4f} | lr 1e-4\n" for i in range(41, 61))
    path = tmp_path / "glued.log"
    path.write_text(head + "progress" + glued + "\n" + tail)
    monkeypatch.setattr(blocks, "STREAM_MIN", 1 << 40)
    whole, whole_stats, whole_events = _parsed(path, "text")
    monkeypatch.setattr(blocks, "STREAM_MIN", 0)
    monkeypatch.setattr(blocks, "BLOCK_BYTES", 256)
    got, stats, events = _parsed(path, "text")
    assert_frame_equal(got.metrics, whole.metrics)
    assert (events, got.meta, stats) == (whole_events, whole.meta, whole_stats)
    glued_rows = whole.metrics.filter(pl.col("line") == 42).select("step", "loss").rows()
    assert glued_rows == [(5, 2.5), (6, 2.6)]
    steps = whole.metrics.filter(pl.col("line") != 42).get_column("step").to_list()
    assert steps == list(range(1, 61))


STREAMING_SEEDS = sorted(
    (fmt, path)
    for fmt, paths in SEEDS.items()
    if fmt in FORMATS and getattr(FORMATS[fmt], "STREAMS", False)
    for path in paths
)


def _outcome(path: Path, fmt: str):
    try:
        return _parsed(path, fmt)
    except LogbookError as exc:
        return str(exc)


def test_damaged_files_in_blocks_parse_as_the_whole_files(tmp_path, monkeypatch):
    """Seeded mutations of the fuzzer's seeds (byte flips, cuts, odd numbers, NUL bytes,
    mixed line ends ...) of every line-by-line format: the same result either way."""
    assert {fmt for fmt, _ in STREAMING_SEEDS} >= {"text", "nemo", "olmo"}
    rng = random.Random(11)
    for fmt, seed in STREAMING_SEEDS:
        for k in range(5):
            ops = [(rng.randrange(N_OPS), rng.randrange(10**6), rng.randrange(10**6))]
            path = tmp_path / f"{fmt}_{k}.log"
            path.write_bytes(mutate(seed_bytes(seed), ops))
            monkeypatch.setattr(blocks, "STREAM_MIN", 1 << 40)
            whole = _outcome(path, fmt)
            monkeypatch.setattr(blocks, "STREAM_MIN", 0)
            for size in (9, 300):
                monkeypatch.setattr(blocks, "BLOCK_BYTES", size)
                got = _outcome(path, fmt)
                if isinstance(whole, str) or isinstance(got, str):
                    assert got == whole, (fmt, seed, ops)
                    continue
                assert_frame_equal(got[0].metrics, whole[0].metrics)
                assert got[2] == whole[2], (fmt, seed, ops)
                assert (got[0].ignored, got[0].meta, got[1]) == (
                    whole[0].ignored,
                    whole[0].meta,
                    whole[1],
                ), (fmt, seed, ops)
