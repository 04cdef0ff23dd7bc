"""Fleet audit benchmark: ``logbook audit`` over many generated runs.

    python -m bench.fleet_bench [--runs 1000] [--records 10000] [--no-ray] [--keep]

Generates ``--runs`` inputs under ``bench/data/fleet/`` (a mix: Megatron-DeepSpeed logs
with restarts and overflows, metaseq logs, logs of a layout only the generic ``text``
reader reads, labelled synthetic incident runs written as logbook JSONL, and 5% corrupt
files: random bytes, a cut gzip, an empty file), then runs, each as a fresh process, as a
user would: ``logbook audit 'DIR/*' --store S1 --workers 1``, the same with ``--workers
2`` into S2, and again into S2 with nothing changed; then, on a local Ray cluster of 2
CPUs started for it (``ray start --head --num-cpus 2``, before the clock starts, as a
user's cluster is up before an audit), ``logbook audit ... --ray ADDRESS`` into S3.
Prints wall times, the 2-worker speed-up, the re-audit's share and Ray's time against
the process pool's, and checks that every input is in ``runs.parquet`` exactly once (its
runs, or one row with its error for each corrupt one) and that the stores are equal.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
KINDS = ("megatron", "metaseq", "text", "synthetic", "corrupt")
SHARE = (0.35, 0.25, 0.25, 0.10, 0.05)


def kind_of(i: int, n: int) -> str:
    """The kind of input ``i`` of ``n``: the shares of ``SHARE``, interleaved."""
    edges = np.cumsum(SHARE)
    return KINDS[int(np.searchsorted(edges, ((i * 0.618034) % 1.0), side="right"))]


def generate(folder: Path, runs: int, records: int) -> dict[str, int]:
    from bench import gen_detect, gen_megatron, gen_metaseq, gen_text

    folder.mkdir(parents=True, exist_ok=True)
    counts = dict.fromkeys(KINDS, 0)
    rng = np.random.default_rng(0)
    for i in range(runs):
        kind = kind_of(i, runs)
        counts[kind] += 1
        if kind == "megatron":
            gen_megatron.write(folder / f"{i:05d}.log", gen_megatron.lines(records, seed=i))
        elif kind == "metaseq":
            gen_metaseq.write(folder / f"{i:05d}.log", gen_metaseq.lines(records, seed=i))
        elif kind == "text":
            gen_text.generate(folder / f"{i:05d}.log", records, seed=i)
        elif kind == "synthetic":
            # (one incident of each of a spike, a collapse or drift, a restart: 2,500 steps
            # each, after the first 3,000)
            steps = max(records, 3000 + 3 * 2500)
            spec = replace(gen_detect.suite(0)[i % 24], steps=steps, seed=i, spikes=1)
            spec = replace(spec, collapses=int(spec.fp16), drifts=int(not spec.fp16))
            spec = replace(spec, restarts=1, lr_cuts=0, nans=0, divergences=0, slowdowns=0)
            run, _ = gen_detect.generate(spec)
            run.write(folder / f"{i:05d}.jsonl")
        else:
            which = i % 3
            path = folder / f"{i:05d}.log"
            if which == 0:
                path.write_bytes(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
            elif which == 1:
                blob = gzip.compress(b"iteration 1/ 10 | lm loss: 2.0 |\n" * 2000)
                (folder / f"{i:05d}.log.gz").write_bytes(blob[: len(blob) // 2])
            else:
                path.write_bytes(b"")
    return counts


# the bench's own throwaway cluster: no token to hand around
RAY_ENV = {
    **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    "RAY_AUTH_MODE": "disabled",
}
RAY_PORT = 6390


def start_ray(cpus: int = 2) -> str:
    """A local Ray cluster of ``cpus`` CPUs (``ray start --head``); its address."""
    ray = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray, "stop", "--force"], capture_output=True, env=RAY_ENV)
    cmd = [ray, "start", "--head", "--num-cpus", str(cpus), "--port", str(RAY_PORT)]
    cmd += ["--include-dashboard", "false", "--disable-usage-stats"]
    subprocess.run(cmd, check=True, capture_output=True, env=RAY_ENV)
    return f"127.0.0.1:{RAY_PORT}"


def stop_ray() -> None:
    ray = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray, "stop", "--force"], capture_output=True, env=RAY_ENV)


def _audit(folder: Path, store: Path, workers: int, ray: str | None = None) -> float:
    cmd = [sys.executable, "-m", "logbook.cli", "audit", str(folder / "*"), "--store", str(store)]
    cmd += ["--ray", ray] if ray else ["--workers", str(workers)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=RAY_ENV)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"audit failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    print(f"  {done.stdout.strip()}")
    return took


def _same_store(a: Path, b: Path) -> bool:
    """Index (times aside) and every table equal, row for row."""
    ia = pl.read_parquet(a / "runs.parquet").drop("seconds")
    ib = pl.read_parquet(b / "runs.parquet").drop("seconds")
    if not ia.equals(ib):
        return False
    for table in ("metrics", "events", "findings"):
        for part in sorted((a / table).glob("run_id=*/part.parquet")):
            other = b / table / part.parent.name / part.name
            if not other.exists() or not pl.read_parquet(part).equals(pl.read_parquet(other)):
                return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the generated fleet and stores")
    ap.add_argument("--no-ray", action="store_true", help="leave out the audit on Ray")
    args = ap.parse_args()
    folder, s1, s2 = DATA / "fleet", DATA / "fleet_store1", DATA / "fleet_store2"
    s3 = DATA / "fleet_store3"
    for d in (folder, s1, s2, s3):
        shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    counts = generate(folder, args.runs, args.records)
    inputs = len(list(folder.iterdir()))
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"generated {inputs:,} inputs ({size / 2**20:,.0f} MiB) in "
          f"{time.perf_counter() - t0:.0f} s: {counts}")  # fmt: skip
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    one = _audit(folder, s1, 1)
    two = _audit(folder, s2, 2)
    again = _audit(folder, s2, 2)
    on_ray = None
    if not args.no_ray:
        address = start_ray(2)
        try:
            on_ray = _audit(folder, s3, 2, ray=address)
        finally:
            stop_ray()
    idx = pl.read_parquet(s2 / "runs.parquet")
    per_input = idx.group_by("input").agg(pl.len(), pl.col("error").is_not_null().all())
    corrupt = per_input.filter(pl.col("error")).height
    dup = idx.get_column("run_id").is_duplicated().sum()
    same = pl.read_parquet(s1 / "runs.parquet").drop("seconds").equals(idx.drop("seconds"))
    print()
    print("| measure | value |\n|---|---|")
    print(f"| inputs in runs.parquet | {per_input.height:,} of {inputs:,} |")
    print(f"| runs | {idx.height:,} (duplicate run ids: {dup}) |")
    print(f"| unreadable inputs, with their error | {corrupt} of {counts['corrupt']} corrupt |")
    print(f"| audit, 1 worker | {one:.1f} s ({inputs / one:.1f} inputs/s) |")
    print(f"| audit, 2 workers | {two:.1f} s ({inputs / two:.1f} inputs/s) |")
    print(f"| speed-up, 2 workers / 1 | {one / two:.2f}x (target >= 1.7x) |")
    print(f"| second audit, nothing changed | {again:.2f} s = {again / two:.1%} of the first "
          "(target <= 5%) |")  # fmt: skip
    print(f"| 1-worker and 2-worker stores equal | {same} |")
    if on_ray is not None:
        same_ray = _same_store(s1, s3)
        rate = f"{on_ray:.1f} s ({inputs / on_ray:.1f} inputs/s)"
        vs = f"{on_ray / two:.2f}x the 2-worker pool's time (target <= 1.3x)"
        print(f"| audit on a local 2-CPU Ray cluster | {rate} = {vs} |")
        print(f"| Ray store equal to the 1-worker store (index and tables) | {same_ray} |")
        same = same and same_ray
    if not args.keep:
        for d in (folder, s1, s2, s3):
            shutil.rmtree(d, ignore_errors=True)
    ok = per_input.height == inputs and dup == 0 and corrupt == counts["corrupt"] and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
