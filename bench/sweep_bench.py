"""Counterfactual sweep benchmark: one preset x 4 variants x 5 seeds, run sequentially,
on the local process pool and on a local Ray cluster, as a user runs them.

    python -m bench.sweep_bench [--seeds 5]

Records the documented unstable preset (``replay record --lr 0.3 --warmup 200 --steps
200 --checkpoint-every 10``), then runs ``replay counterfactual --from 80 --until 200``
with baseline, half_lr, skip_30 and clip_1, each a fresh process: ``--jobs 1``
(the baseline), ``--jobs 2``, and ``--ray ADDRESS`` on a 2-CPU cluster started before
the clock (``ray start --head --num-cpus 2``). Prints wall times as ratios against the
sequential run and checks that the three tables (and results.json) are identical.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.fleet_bench import RAY_ENV, start_ray, stop_ray

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "sweep"
PRESET = ["--lr", "0.3", "--warmup", "200", "--steps", "200", "--checkpoint-every", "10"]
VARIANTS = ("baseline=baseline", "half_lr=lr_scale:0.5", "skip_30=skip:+30", "clip_1=clip:1.0")


def _logbook(*args: str) -> float:
    cmd = [sys.executable, "-m", "logbook.cli", *args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=RAY_ENV)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {done.stderr.strip()[-300:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    shutil.rmtree(DATA, ignore_errors=True)
    rec = DATA / "unstable"
    _logbook("replay", "record", "-o", str(rec), *PRESET)
    sweep = ["replay", "counterfactual", str(rec), "--from", "80", "--until", "200"]
    sweep += [a for v in VARIANTS for a in ("--variant", v)] + ["--seeds", str(args.seeds)]
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    seq = _logbook(*sweep, "-o", str(DATA / "seq"), "--jobs", "1")
    pool = _logbook(*sweep, "-o", str(DATA / "pool"), "--jobs", "2")
    address = start_ray(2)
    try:
        on_ray = _logbook(*sweep, "-o", str(DATA / "ray"), "--ray", address)
    finally:
        stop_ray()
    same = all(
        filecmp.cmp(DATA / "seq" / f, DATA / other / f, shallow=False)
        for other in ("pool", "ray")
        for f in ("table.md", "results.json")
    )
    jobs = len(VARIANTS) * args.seeds
    print(f"\n{len(VARIANTS)} variants x {args.seeds} seeds = {jobs} jobs, steps 80..200\n")
    print("| run | wall time | against sequential |\n|---|---|---|")
    print(f"| sequential (--jobs 1) | {seq:.1f} s | 1.00x |")
    print(f"| process pool (--jobs 2) | {pool:.1f} s | {pool / seq:.2f}x |")
    print(f"| local Ray cluster, 2 CPUs (--ray) | {on_ray:.1f} s | {on_ray / seq:.2f}x "
          "(target <= 0.6x) |")  # fmt: skip
    print(f"| tables and results.json identical | {same} | |")
    print()
    print((DATA / "ray" / "table.md").read_text())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
