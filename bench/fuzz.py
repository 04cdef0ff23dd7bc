"""Long fuzz profile: seeded mutations of every format's fixtures through ``logbook
parse -o`` and ``logbook detect --json`` (the checks of ``tests/test_fuzz.py``).

    python -m bench.fuzz [--examples 10000] [--seed 0] [--workers 2] [--format F ...]

Prints, per format and in all, the cases run, the cases that broke an invariant by kind
(internal error, hang, exit code, slow, accounting) and the first mutation of each
distinct problem, so that it can be replayed. Exit status 1 when any case broke one.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import random
import sys
import tempfile
import time
from pathlib import Path

from bench._mutations import N_OPS, SEEDS, run_case


def _cases(fmt: str, n: int, seed: int):
    rng = random.Random(f"{seed}:{fmt}")
    paths = SEEDS[fmt]
    for k in range(n):
        ops = [
            (rng.randrange(N_OPS), rng.randrange(10**6), rng.randrange(10**6))
            for _ in range(rng.randint(1, 3))
        ]
        yield fmt, paths[k % len(paths)], ops


def _run(case):
    fmt, path, ops = case
    with tempfile.TemporaryDirectory() as d:
        return fmt, path, ops, run_case(fmt, path, ops, Path(d))


def _kind(problem: str) -> str:
    for word in ("internal error", "hang", "accounting", "counted twice", "took", "exit"):
        if word in problem:
            return word
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10_000, help="mutations per format")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--format", nargs="*", default=None, choices=sorted(SEEDS))
    args = ap.parse_args()
    formats = args.format or sorted(SEEDS)
    cases = [c for f in formats for c in _cases(f, args.examples, args.seed)]
    t0 = time.perf_counter()
    done = collections.Counter()
    broken = collections.Counter()
    kinds = collections.Counter()
    first: dict[tuple[str, str], tuple[str, list]] = {}
    ctx = mp.get_context("fork")
    with ctx.Pool(args.workers, maxtasksperchild=500) as pool:
        for i, (fmt, path, ops, problems) in enumerate(pool.imap_unordered(_run, cases, 8)):
            done[fmt] += 1
            if problems:
                broken[fmt] += 1
            for p in problems:
                kinds[_kind(p)] += 1
                first.setdefault((fmt, p[:160]), (path, ops))
            if (i + 1) % 1000 == 0:
                print(
                    f"{i + 1:,}/{len(cases):,} cases, {time.perf_counter() - t0:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    took = time.perf_counter() - t0
    print(
        f"command: python -m bench.fuzz --examples {args.examples} --seed {args.seed}"
        f" --workers {args.workers}"
    )
    print(
        f"{sum(done.values()):,} cases in {took:.0f} s ({took / max(1, sum(done.values())):.3f}"
        f" s each, {args.workers} workers)"
    )
    print("| format | cases | cases broken |")
    print("|---|---|---|")
    for f in formats:
        print(f"| {f} | {done[f]:,} | {broken[f]:,} |")
    names = ("internal error", "hang", "exit", "took", "accounting", "counted twice", "other")
    print("problems by kind: " + ", ".join(f"{k} {kinds[k]}" for k in names))
    for (fmt, p), (path, ops) in sorted(first.items()):
        print(f"- {fmt}: {p}  [{path} {ops}]")
    return 1 if sum(broken.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
