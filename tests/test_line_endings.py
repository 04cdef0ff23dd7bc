"""Line endings and streams: LF, CR LF and lone CR read alike for every text format;
standard input, pipes and FIFOs read once, with the findings of the file itself; the
line accounting printed by ``parse`` adds up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _cli import invoke
from polars.testing import assert_frame_equal

import parsers
from bench._mutations import SEEDS
from logbook.errors import LogbookError

ROOT = Path(__file__).resolve().parents[1]
TEXT_SEEDS = [
    p
    for f, paths in sorted(SEEDS.items())
    if f not in ("tensorboard", "hf-trainer", "logbook")
    for p in paths
]


def _read(path: Path) -> list | str:
    """The runs' metrics, or the one-line error the input gives."""
    try:
        return [r.metrics for r in parsers.read_logs(str(path))]
    except LogbookError as exc:
        return str(exc).replace(str(path), "LOG")


@pytest.mark.parametrize("seed", TEXT_SEEDS, ids=lambda p: Path(p).name)
@pytest.mark.parametrize("ending", [b"\r", b"\r\n"], ids=["cr", "crlf"])
def test_every_line_ending_reads_the_same_records(seed, ending, tmp_path):
    raw = (ROOT / seed).read_bytes().replace(b"\r\n", b"\n")
    lf = tmp_path / "lf" / Path(seed).name
    other = tmp_path / "other" / Path(seed).name
    for p, data in ((lf, raw), (other, raw.replace(b"\n", ending))):
        p.parent.mkdir()
        p.write_bytes(data)
    assert parsers.sniff(other) == parsers.sniff(lf)
    got, want = _read(other), _read(lf)
    if isinstance(want, str):
        assert got == want
        return
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert_frame_equal(a, b)


def test_a_cr_only_log_is_read_and_gated(tmp_path, monkeypatch, capsys):
    log = tmp_path / "cr.log"
    log.write_bytes(
        (ROOT / "fixtures/megatron/spike_restart.log").read_bytes().replace(b"\n", b"\r")
    )
    code, out, _ = invoke(monkeypatch, capsys, "detect", "--fail-on", "warning", str(log))
    assert code == 1 and out.startswith("cr.log (megatron): 121 records, 2 segment(s)")


def test_parse_prints_five_line_counts_that_add_up(monkeypatch, capsys):
    code, out, _ = invoke(monkeypatch, capsys, "parse", "fixtures/megatron/spike_restart.log")
    assert code == 0
    line = next(x for x in out.splitlines() if " lines = " in x)
    assert line == (
        "fixtures/megatron/spike_restart.log: 270 lines = 121 record + 14 event"
        " + 33 continuation + 102 ignored + 0 unrecognized; 121 records"
    )
    counts = line.split(" = ")[1].split(";")[0]
    n = [int(x) for x in re.findall(r"(\d+) [a-z]+", counts)]
    assert sum(n) == 270


def _logbook(*args: str, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbook.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )


def _findings(stdout: bytes) -> list[str]:
    return stdout.decode().splitlines()[1:]  # (the first line names the input)


def test_stdin_gives_the_findings_of_the_file():
    log = "fixtures/megatron/spike_restart.log"
    direct = _logbook("detect", log)
    piped = _logbook("detect", "-", stdin=(ROOT / log).read_bytes())
    assert (piped.returncode, piped.stderr) == (direct.returncode, b"")
    assert _findings(piped.stdout) == _findings(direct.stdout) and len(_findings(direct.stdout)) > 3


def test_a_gzip_stream_on_stdin_is_read():
    import gzip

    data = gzip.compress((ROOT / "fixtures/megatron/spike_restart.log").read_bytes())
    got = _logbook("parse", "-", stdin=data)
    assert got.returncode == 0
    assert (
        got.stdout.decode().splitlines()[0] == "megatron: 121 records, 2 segment(s), steps 1..100"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_read_once_without_hanging(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = (ROOT / "fixtures/megatron/spike_restart.log").read_bytes()

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    got = _logbook("parse", str(fifo))
    writer.join(5)
    assert got.returncode == 0, got.stderr
    assert b"270 lines = 121 record" in got.stdout
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("logbook-stream-*"))
