"""Detection time as a share of parse time on the 1,000,000-record benchmark logs.

    python -m bench.detect_vs_parse [--repeat N]

Parses each benchmark log (``parsers.read_log``, end to end) and runs every detector
on the run (``logbook.detectors.detect``), alternating, best of N each, in one process.
The logs are the parse benchmark's (``bench/data/``; made by ``bench.parse_bench``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from logbook.detectors import detect
from parsers import read_log

DATA = Path(__file__).resolve().parent / "data"
LOGS = ("megatron_deepspeed_1000000.log", "metaseq_plain_1000000.log")


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    print("| log | records | parse s | detect s | detect / parse | target |")
    print("|---|---|---|---|---|---|")
    for name in LOGS:
        path = DATA / name
        if not path.exists():
            print(f"| {name} | missing: run `python -m bench.parse_bench` first | | | | |")
            continue
        t_parse, run = best_of(lambda p=path: read_log(p), repeat)
        t_detect, _ = best_of(lambda r=run: detect(r), repeat)
        share = t_detect / t_parse
        verdict = "PASS" if share <= 0.25 else "FAIL"
        print(
            f"| {name} | {run.metrics.height:,} | {t_parse:.3f} | {t_detect:.3f} "
            f"| {share:.2f} | <= 0.25 {verdict} |"
        )


if __name__ == "__main__":
    main()
