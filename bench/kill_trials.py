"""kill -9 at random moments during ``parse -o``, ``report -o`` and ``replay record``.

    python -m bench.kill_trials [--trials 20] [--seed 0]

For each command, ``--trials`` times: start it in a fresh process over an existing
output, SIGKILL it after a random delay (within the time a full run takes), then check
that the old output is intact (byte for byte) or fully replaced by a complete new one,
and that the next run of the same command leaves no temp file behind. For ``replay
record``, the interrupted recording is resumed (``logbook replay resume``) and must equal
an uninterrupted recording: ``replay verify --from 0`` passes and the metrics, wall-clock
columns aside, are the same bit for bit. Prints one row per command; exit 1 on a failure.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGBOOK = [sys.executable, "-m", "logbook.cli"]


def _timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def _kill_after(argv: list[str], delay: float) -> bool:
    """Run ``argv``, SIGKILL it after ``delay`` s; whether it was still running."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp"))


def output_trials(name: str, argv, out: Path, trials: int, rng: random.Random) -> dict:
    full = _timed(argv)
    good = out.read_bytes()
    killed = intact = replaced = 0
    for _ in range(trials):
        out.write_bytes(good + b"")  # the old output
        before = out.read_bytes()
        if _kill_after(argv, rng.uniform(0.05, full)):
            killed += 1
        now = out.read_bytes()
        intact += now == before
        replaced += now != before and now == good
    left_before = _temps(out.parent)
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
    left_after = _temps(out.parent)
    ok = intact + replaced == trials and not left_after
    return {
        "command": name,
        "trials": trials,
        "killed mid-run": killed,
        "old output intact or whole new one": intact + replaced,
        "temp files after the kills": len(left_before),
        "temp files after the next run": len(left_after),
        "ok": ok,
    }


def replay_trials(work: Path, trials: int, rng: random.Random) -> dict:
    record = ["replay", "record", "--steps", "60", "--checkpoint-every", "10"]
    whole = work / "whole"
    full = _timed([*LOGBOOK, *record, "-o", str(whole)])
    import polars as pl

    want = pl.read_ndjson(whole / "run.jsonl").filter(pl.col("type") == "metrics")
    want = want.drop("step_time_s", "time", strict=False)
    killed = resumed = 0
    for k in range(trials):
        out = work / f"cut{k}"
        if _kill_after([*LOGBOOK, *record, "-o", str(out)], rng.uniform(0.5, full)):
            killed += 1
        if not (out / "recording.json").exists():
            shutil.rmtree(out, ignore_errors=True)  # killed before anything was written
            subprocess.run([*LOGBOOK, *record, "-o", str(out)], cwd=ROOT, capture_output=True)
        else:
            subprocess.run([*LOGBOOK, "replay", "resume", str(out)], cwd=ROOT, capture_output=True)
        verify = subprocess.run(
            [*LOGBOOK, "replay", "verify", str(out), "--from", "0"], cwd=ROOT, capture_output=True
        )
        got = pl.read_ndjson(out / "run.jsonl").filter(pl.col("type") == "metrics")
        got = got.drop("step_time_s", "time", strict=False)
        same = got.equals(want)
        resumed += verify.returncode == 0 and same and not _temps(out)
    return {
        "command": "replay record (then resume)",
        "trials": trials,
        "killed mid-run": killed,
        "resumed to the same run": resumed,
        "ok": resumed == trials,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory(dir=ROOT / "bench") as d:
        work = Path(d)
        log = work / "big.log"
        text = (ROOT / "fixtures/megatron/spike_restart.log").read_text()
        log.write_text(text * 2000)  # about 540,000 lines: a parse of a second or two
        out = work / "out" / "run.parquet"
        out.parent.mkdir()
        rows.append(
            output_trials(
                "parse -o run.parquet",
                [*LOGBOOK, "parse", str(log), "-o", str(out)],
                out,
                args.trials,
                rng,
            )
        )
        rep = work / "rep" / "report.html"
        rep.parent.mkdir()
        small = ROOT / "fixtures/megatron/spike_restart.log"
        rows.append(
            output_trials(
                "report -o report.html",
                [*LOGBOOK, "report", str(small), "-o", str(rep)],
                rep,
                args.trials,
                rng,
            )
        )
        rows.append(replay_trials(work, args.trials, rng))
    print(f"command: python -m bench.kill_trials --trials {args.trials} --seed {args.seed}")
    for r in rows:
        print(" | ".join(f"{k}: {v}" for k, v in r.items()))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
