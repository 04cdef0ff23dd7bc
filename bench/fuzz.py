"""Long fuzz profile: seeded mutations of every format's fixtures through ``logbook
parse -o`` and ``logbook detect --json`` (the checks of ``tests/test_fuzz.py``).

    python -m bench.fuzz [--examples 10000] [--seed 0] [--workers 2] [--format F ...]
    python -m bench.fuzz --examples 10000 --cases 0:2000 --save bench/data/fuzz/0.json
    python -m bench.fuzz --combine bench/data/fuzz/*.json

Prints, per format and in all, the cases run, the cases that broke an invariant by kind
(internal error, hang, exit code, slow, accounting) and the first mutation of each
distinct problem, so that it can be replayed. Exit status 1 when any case broke one.

The long profile takes hours: ``--cases A:B`` runs mutations A to B-1 of each format
(the same mutations a whole run makes there), ``--save`` keeps that part's tallies, and
``--combine`` adds the saved parts up (refusing parts of other seeds or that overlap).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import random
import sys
import tempfile
import time
from pathlib import Path

from bench._mutations import N_OPS, SEEDS, run_case


def _cases(fmt: str, n: int, seed: int, lo: int = 0):
    """Mutations ``lo`` to ``n - 1`` of one format (those before are drawn and left)."""
    rng = random.Random(f"{seed}:{fmt}")
    paths = SEEDS[fmt]
    for k in range(n):
        ops = [
            (rng.randrange(N_OPS), rng.randrange(10**6), rng.randrange(10**6))
            for _ in range(rng.randint(1, 3))
        ]
        if k >= lo:
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
    ap.add_argument("--cases", default=None, help="A:B, mutations A to B-1 of each format")
    ap.add_argument("--save", type=Path, default=None, help="write this part's tallies (JSON)")
    ap.add_argument("--combine", nargs="+", type=Path, default=None, help="saved parts to add")
    args = ap.parse_args()
    if args.combine:
        return _report(*_combined(args.combine))
    formats = args.format or sorted(SEEDS)
    lo, hi = 0, args.examples
    if args.cases:
        lo, hi = (int(x) for x in args.cases.split(":"))
        hi = min(hi, args.examples)
    cases = [c for f in formats for c in _cases(f, hi, args.seed, lo)]
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
    part = {
        "seed": args.seed,
        "cases": [lo, hi],
        "formats": formats,
        "seconds": round(took, 1),
        "workers": args.workers,
        "done": dict(done),
        "broken": dict(broken),
        "kinds": dict(kinds),
        "first": [[f, p, path, ops] for (f, p), (path, ops) in first.items()],
    }
    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.save.with_suffix(".tmp")
        tmp.write_text(json.dumps(part))
        tmp.replace(args.save)
    command = f"python -m bench.fuzz --examples {args.examples} --seed {args.seed}"
    command += f" --workers {args.workers}" + (f" --cases {lo}:{hi}" if args.cases else "")
    return _report(command, [part])


def _combined(paths: list[Path]) -> tuple[str, list[dict]]:
    parts = [json.loads(p.read_text()) for p in paths]
    if len({p["seed"] for p in parts}) > 1:
        raise SystemExit("parts of different seeds")
    spans: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for p in parts:
        for f in p["formats"]:
            spans[f].append(tuple(p["cases"]))
    for f, s in spans.items():
        s.sort()
        if any(a[1] > b[0] for a, b in zip(s, s[1:], strict=False)):
            raise SystemExit(f"overlapping parts for {f}")
    return "python -m bench.fuzz --combine " + " ".join(str(p) for p in paths), parts


def _report(command: str, parts: list[dict]) -> int:
    done: collections.Counter = collections.Counter()
    broken: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    first: dict[tuple[str, str], tuple[str, list]] = {}
    for p in parts:
        done.update(p["done"])
        broken.update(p["broken"])
        kinds.update(p["kinds"])
        for f, prob, path, ops in p["first"]:
            first.setdefault((f, prob), (path, ops))
    formats = sorted({f for p in parts for f in p["formats"]})
    took = sum(p["seconds"] for p in parts)
    workers = ", ".join(sorted({str(p["workers"]) for p in parts}))
    print(f"command: {command}")
    print(
        f"{sum(done.values()):,} cases in {took:.0f} s ({took / max(1, sum(done.values())):.3f}"
        f" s each, {workers} workers)"
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
