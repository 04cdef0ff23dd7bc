"""CPU use of ``logbook watch`` on a run that logs N records a second.

    python -m bench.watch_cpu [--rate 10] [--seconds 60] [--interval 1] [--history 5000]

A writer appends Megatron iteration lines (each in two writes, so that reads meet cut
lines) to a log that already holds ``--history`` records, at ``--rate`` records a
second. ``logbook watch LOG --interval S`` runs as a user runs it (the console script,
a fresh process); its CPU time (user + system, from ``/proc``) is sampled after a
warm-up (start-up and the catch-up on the history) and again ``--seconds`` later.

Baseline, measured in the same run on the same writer: what a user does without a live
mode, ``logbook detect LOG`` run again every interval (one fresh process each time, as
``watch -n S logbook detect LOG`` runs it), the same span of seconds. Printed: each one's
CPU as a share of one core, and watch's CPU over the baseline's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

WARMUP_S = 8.0
TICK = os.sysconf("SC_CLK_TCK")


def line(step: int, loss: float, gnorm: float) -> str:
    return (
        f" iteration {step:8d}/ 1000000 | consumed samples: {step * 256:12d} | elapsed time "
        f"per iteration (ms): 101.3 | learning rate: 3.000E-04 | global batch size:   256 | "
        f"lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: {gnorm:.3f} | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


class Writer(threading.Thread):
    def __init__(self, path: Path, rate: float, start: int, rng: np.random.Generator) -> None:
        super().__init__(daemon=True)
        self.path, self.rate, self.step, self.rng = path, rate, start, rng
        self.stop = threading.Event()

    def run(self) -> None:
        with self.path.open("a") as fh:
            while not self.stop.is_set():
                self.step += 1
                text = line(self.step, 2.5 + 0.05 * self.rng.standard_normal(), 0.8)
                half = len(text) // 2
                fh.write(text[:half])
                fh.flush()
                time.sleep(0.5 / self.rate)
                fh.write(text[half:])
                fh.flush()
                time.sleep(0.5 / self.rate)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def with_history(path: Path, records: int, rng: np.random.Generator) -> None:
    with path.open("w") as fh:
        fh.write("using world size: 8, data-parallel size: 8\n")
        for s in range(1, records + 1):
            fh.write(line(s, 2.5 + 0.05 * rng.standard_normal(), 0.8))


def measure_watch(logbook: str, path: Path, args: argparse.Namespace) -> tuple[float, int]:
    rng = np.random.default_rng(1)
    with_history(path, args.history, rng)
    w = Writer(path, args.rate, args.history, rng)
    w.start()
    cmd = [logbook, "watch", str(path), "--interval", str(args.interval)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(WARMUP_S)
    c0, s0 = cpu_seconds(proc.pid), w.step
    time.sleep(args.seconds)
    c1, s1 = cpu_seconds(proc.pid), w.step
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    w.stop.set()
    w.join()
    if "watched" not in err:
        sys.exit(f"watch did not end as expected:\n{err}")
    return (c1 - c0) / args.seconds, s1 - s0


def measure_rerun(logbook: str, path: Path, args: argparse.Namespace) -> tuple[float, int]:
    rng = np.random.default_rng(1)
    with_history(path, args.history, rng)
    w = Writer(path, args.rate, args.history, rng)
    w.start()
    time.sleep(WARMUP_S / 2)
    c0, s0, end = children_cpu(), w.step, time.monotonic() + args.seconds
    while time.monotonic() < end:
        tick = time.monotonic()
        subprocess.run([logbook, "detect", str(path)], capture_output=True, check=False)
        time.sleep(max(0.0, args.interval - (time.monotonic() - tick)))
    c1, s1 = children_cpu(), w.step
    w.stop.set()
    w.join()
    return (c1 - c0) / args.seconds, s1 - s0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--history", type=int, default=5000)
    args = ap.parse_args()
    logbook = str(Path(sys.executable).with_name("logbook"))
    with tempfile.TemporaryDirectory() as tmp:
        watch_cpu, watched = measure_watch(logbook, Path(tmp) / "watch.log", args)
        rerun_cpu, rerun_recs = measure_rerun(logbook, Path(tmp) / "rerun.log", args)
    print(
        f"rate {args.rate:g} records/s, interval {args.interval:g} s, {args.seconds:g} s "
        f"measured, log of {args.history:,} records before"
    )
    print("| how | records written | CPU, share of one core | vs baseline |")
    print("|---|---|---|---|")
    print(f"| `logbook watch` | {watched} | {watch_cpu:.1%} | {watch_cpu / rerun_cpu:.3f} |")
    print(f"| `logbook detect` every interval (baseline) | {rerun_recs} | {rerun_cpu:.1%} | 1 |")
    verdict = "holds" if watch_cpu <= 0.05 else "does not hold"
    print(f"target: watch <= 5% of one core at 10 records/s: {verdict}")


if __name__ == "__main__":
    main()
