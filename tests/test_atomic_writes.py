"""Outputs: written atomically with the mode ``open`` would give, through symlinks,
stale temp files of killed writers removed, unwritable paths a one-line error, and no
temp file left by SIGTERM."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logbook.atomic import atomic_open
from logbook.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_a_new_file_gets_the_umask_mode_and_an_old_one_keeps_its_mode(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_open(tmp_path / "a.txt") as fh:
            fh.write(b"x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.txt") == 0o640
    os.chmod(tmp_path / "a.txt", 0o604)
    with atomic_open(tmp_path / "a.txt") as fh:
        fh.write(b"y")
    assert _mode(tmp_path / "a.txt") == 0o604 and (tmp_path / "a.txt").read_bytes() == b"y"


def test_a_symlinked_output_is_written_through(tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_text("old")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with atomic_open(link, "w") as fh:
        fh.write("new")
    assert link.is_symlink() and real.read_text() == "new"


def test_stale_temp_files_of_dead_writers_go_on_the_next_write(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    stale = tmp_path / f".out.jsonl.{dead}.abc123.tmp"
    stale.write_text("partial")
    live = tmp_path / f".out.jsonl.{os.getppid()}.abc123.tmp"  # a writer still running
    live.write_text("partial")
    with atomic_open(tmp_path / "out.jsonl") as fh:
        fh.write(b"x")
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out.jsonl", live.name])


def test_an_unwritable_path_is_a_one_line_error(tmp_path):
    (tmp_path / "file").write_text("x")
    why = r"cannot write \(.*file is a file, not a folder\)"
    with pytest.raises(InputError, match=why), atomic_open(tmp_path / "file" / "x") as fh:
        fh.write(b"x")


def test_sigterm_leaves_no_temp_file_and_the_old_output_intact(tmp_path):
    out = tmp_path / "run.parquet"
    out.write_bytes(b"old output")
    text = (ROOT / "fixtures/megatron/spike_restart.log").read_text()
    log = tmp_path / "big.log"
    # a parse still at work when the signal comes (a signal during the interpreter's
    # start-up, before logbook runs, on a loaded machine: tried again, later)
    for copies, wait in ((400, 1.0), (1600, 1.0), (6400, 1.0), (6400, 3.0), (6400, 6.0)):
        log.write_text(text * copies)
        proc = subprocess.Popen(
            [sys.executable, "-m", "logbook.cli", "parse", str(log), "-o", str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(wait)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        if proc.returncode not in (0, -signal.SIGTERM):
            break
        out.write_bytes(b"old output")
    assert proc.returncode == 143 and err.decode().strip() == "logbook: error: terminated"
    assert out.read_bytes() == b"old output"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
