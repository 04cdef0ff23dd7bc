"""``logbook watch`` on logs that grow while it reads them.

A background writer appends Megatron iteration lines (each line in two writes, so that
reads meet cut lines), rotates the file part way, and plants a loss spike after a
grad-norm drift (the records of ``fixtures/detect/spike_precursor.jsonl``: drift from
step 658, spike 700..707). The command runs as a user runs it, in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from logbook.run import Run

ROOT = Path(__file__).resolve().parent.parent
LOGBOOK = str(Path(sys.executable).with_name("logbook"))
RECORDS = Run.read(ROOT / "fixtures/detect/spike_precursor.jsonl").metrics.to_dicts()
INTERVAL = 0.3
BANNER = "using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1\n"


def megatron_line(r: dict) -> str:
    return (
        f" iteration {r['step']:8d}/    1000 | consumed samples: {r['step'] * 256:12d} | "
        "elapsed time per iteration (ms): 5203.8 | "
        f"learning rate: {r['lr']:.3E} | global batch size:   256 | lm loss: {r['loss']:.6E} | "
        f"loss scale: 65536.0 | grad norm: {r['grad_norm']:.3f} | number of skipped "
        "iterations:   0 | number of nan iterations:   0 |\n"
    )


class Writer(threading.Thread):
    """Writes records ``start..`` of the fixture to ``path``; ``written[step]`` is when
    a record's line was complete, ``begun[step]`` when its first byte was written."""

    def __init__(self, path: Path, start: int, rate, rotate_at: int | None = None) -> None:
        super().__init__(daemon=True)
        self.path, self.start_at, self.rate, self.rotate_at = path, start, rate, rotate_at
        self.written: dict[int, float] = {}
        self.begun: dict[int, float] = {}

    def run(self) -> None:
        fh = self.path.open("a")
        for r in RECORDS[self.start_at - 1 :]:
            step = r["step"]
            if step == self.rotate_at:  # logrotate: renamed away, a new file started
                fh.close()
                os.rename(self.path, self.path.with_name(self.path.name + ".1"))
                fh = self.path.open("a")
            text = megatron_line(r)
            pause = 0.5 / self.rate(step)
            self.begun[step] = time.monotonic()
            fh.write(text[:40])
            fh.flush()
            time.sleep(pause)
            fh.write(text[40:])
            fh.flush()
            self.written[step] = time.monotonic()
            time.sleep(pause)
        fh.close()


def _rate(step: int) -> float:
    """25 records/s around the planted incident, 100/s elsewhere."""
    return 25.0 if 600 <= step <= 760 else 100.0


class Watching:
    """A ``logbook watch`` process and the lines it printed, with when they came."""

    def __init__(self, proc: subprocess.Popen, got: list, reader: threading.Thread):
        self.proc, self.got, self.reader = proc, got, reader

    def communicate(self, timeout: float) -> tuple[None, str]:
        self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        assert self.proc.stderr is not None
        return None, self.proc.stderr.read()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode


def start_watch(*args: str) -> tuple[Watching, list[tuple[float, str]]]:
    proc = subprocess.Popen(
        [LOGBOOK, "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    got: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            got.append((time.monotonic(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "watching ...": it is reading
    assert first.startswith("watching "), first
    return Watching(proc, got, reader), got


def prewrite(path: Path, upto: int) -> None:
    path.write_text(BANNER + "".join(megatron_line(r) for r in RECORDS[:upto]))


def test_precursor_before_the_spike_and_the_spike_within_two_intervals(tmp_path):
    log = tmp_path / "train.log"
    prewrite(log, 400)
    proc, got = start_watch(str(log), "--interval", str(INTERVAL), "--json", "--until-idle", "2")
    writer = Writer(log, 401, _rate, rotate_at=650)
    writer.start()
    writer.join()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    rows = [(t, json.loads(line)) for t, line in got]
    kinds = [r["kind"] for _, r in rows]
    assert kinds == ["grad_norm_drift", "loss_spike"], kinds
    (t_pre, pre), (t_spike, spike) = rows
    # the precursor, as a precursor, before the spike's first record was begun
    assert pre["evidence"]["live"] == "precursor"
    assert pre["message"].endswith("; a spike may follow")
    # fired at step 666, as ``detect`` says on the whole run; where its rise began is
    # as far as the records then in could tell (658 on the whole run)
    assert pre["step"] == 666 and 650 <= pre["start_step"] <= 666
    assert t_pre < writer.begun[700]
    # the incident when complete: within two intervals of its last record
    assert (spike["start_step"], spike["end_step"], spike["severity"]) == (700, 707, "critical")
    assert spike["evidence"]["live"] == "complete"
    assert t_spike - writer.written[707] <= 2 * INTERVAL
    # nothing lost across cut lines and the rotation; nothing unread
    assert "watched 1,000 records; 2 finding(s)" in err
    assert "unrecognized" not in err


def test_fail_on_stops_at_the_spike_and_on_finding_gets_each_finding(tmp_path):
    log = tmp_path / "train.log"
    prewrite(log, 600)
    sink = tmp_path / "findings.jsonl"
    hook = f"cat >> {sink}"
    proc, got = start_watch(
        str(log), "--interval", "0.2", "--fail-on", "critical", "--on-finding", hook
    )
    writer = Writer(log, 601, lambda _s: 100.0)
    writer.start()
    _, err = proc.communicate(timeout=60)
    writer.join()
    assert proc.returncode == 1
    assert "stopping: a critical finding (loss_spike at step 700)" in err
    lines = [line for _, line in got]
    assert [line.split()[1:3] for line in lines] == [
        ["WARNING", "grad_norm_drift"],
        ["CRITICAL", "loss_spike"],
    ]
    assert "step 666 (658.." in lines[0] and lines[0].rstrip().endswith("a spike may follow")
    hooked = [json.loads(x) for x in sink.read_text().splitlines()]
    assert [h["kind"] for h in hooked] == ["grad_norm_drift", "loss_spike"]
    assert hooked[1]["start_step"] == 700


def test_a_folder_where_a_second_launch_appears(tmp_path):
    runs = tmp_path / "logs"
    runs.mkdir()
    first = runs / "launch-1.log"
    first.write_text(BANNER + "".join(megatron_line(r) for r in RECORDS[:300]))
    proc, got = start_watch(
        str(runs), "--interval", "0.2", "--json", "--min-severity", "info", "--until-idle", "1.5"
    )
    time.sleep(0.6)
    second = runs / "launch-2.log"  # resumed from the checkpoint of step 250
    with second.open("w") as fh:
        fh.write(BANNER)
        for r in RECORDS[250:320]:
            fh.write(megatron_line(r))
            fh.flush()
            time.sleep(0.005)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    rows = [json.loads(line) for _, line in got]
    restarts = [r for r in rows if r["kind"] == "restart"]
    assert len(restarts) == 1
    assert restarts[0]["step"] == 251 and restarts[0]["evidence"]["live"] == "complete"
    assert "launch-1.log (megatron)" in err
    assert "watched 370 records" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "logbook: error: no log given"),
        (["x.log", "--interval", "0"], "--interval 0.0: give a number of seconds above 0"),
        (["x.log", "--fail-on", "info"], "--fail-on 'info': use warning or critical"),
        (["nowhere/x.log"], "nowhere/x.log: no such file, and its folder does not exist"),
        (["fixtures/detect/healthy.jsonl"], "a logbook file is a finished run"),
    ],
)
def test_bad_use_is_one_line_and_exit_2(args, message):
    p = subprocess.run(
        [LOGBOOK, "watch", *args, "--max-time", "5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if not x.startswith("watching ")]
    assert len(lines) == 1 and message in lines[0], p.stderr
    assert "Traceback" not in p.stderr
