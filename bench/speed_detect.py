"""Detection speed on a large synthetic run (one record per step, fp16, restarts).

    python -m bench.speed_detect [RECORDS] [--repeat N] [--logs-act]

Prints the time of ``logbook.detectors.detect`` (best of N) and of each detector.
"""

from __future__ import annotations

import sys
import time

from bench.gen_detect import Spec, generate
from logbook.detectors import DETECTORS, build_context, default_config, detect


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args and args[0].isdigit() else 1_000_000
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    spec = Spec(
        name="speed",
        seed=7,
        steps=n,
        restarts=3,
        spikes=5,
        collapses=2,
        drifts=1,
        logs_act="--logs-act" in args,
    )
    run, _ = generate(spec)
    cols = [c for c in run.metrics.columns if run.metrics.get_column(c).is_not_null().any()]
    print(f"{run.metrics.height:,} records, columns: {', '.join(cols)}")
    best = min(_timed(lambda: detect(run)) for _ in range(repeat))
    print(f"detect: {best:.3f} s ({best / run.metrics.height * 1e6:.3f} s per 1M records)")
    t_ctx = _timed(lambda: build_context(run))
    ctx = build_context(run)
    cfg = default_config()
    print(f"  build_context: {t_ctx:.3f} s")
    for name, det in DETECTORS.items():
        print(f"  {name}: {_timed(lambda det=det, name=name: det(ctx, cfg[name])):.3f} s")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
