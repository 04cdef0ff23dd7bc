"""Convert a Megatron-LM CI golden-values file into a metrics JSONL.

The golden file holds series such as ``"lm loss"`` and ``"iteration-time"``, each as
``{"start_step", "end_step", "step_interval", "values": {step: value}}``; values of
steps the run never reached are the string ``"nan"``. Output: one object per step that
has a value, ``{"step": ..., "loss": ..., "step_time_s": ...}`` (generic metrics JSONL);
with ``--logbook``, a logbook JSONL run instead. Trailing ``"nan"`` values (not reached)
are left out; a ``"nan"`` between real values is kept as NaN (a real non-finite loss).

    python -m bench.curve_to_jsonl GOLDEN.json OUT.jsonl [--logbook]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import polars as pl

from logbook.run import Run, RunMeta

SERIES = {"lm loss": "loss", "iteration-time": "step_time_s"}


def _series(values: dict[str, object]) -> tuple[list[int], list[float]]:
    steps = sorted(int(k) for k in values)
    vals = [float(values[str(s)]) for s in steps]
    reached = max((i for i, v in enumerate(vals) if not math.isnan(v)), default=-1)
    return steps[: reached + 1], vals[: reached + 1]


def golden_frame(path: str | Path) -> pl.DataFrame:
    """The golden file's series as one frame, one row per step."""
    data = json.loads(Path(path).read_text())
    if "lm loss" not in data:
        raise SystemExit(f"{path}: no 'lm loss' series")
    steps, loss = _series(data["lm loss"]["values"])
    frame = pl.DataFrame(
        {"step": steps, "loss": loss}, schema={"step": pl.Int64, "loss": pl.Float64}
    )
    for key, col in SERIES.items():
        if key == "lm loss" or key not in data:
            continue
        s, v = _series(data[key]["values"])
        other = pl.DataFrame({"step": s, col: v}, schema={"step": pl.Int64, col: pl.Float64})
        other = other.filter(pl.col(col).is_not_nan())  # not measured at those steps
        frame = frame.join(other, on="step", how="left")
    return frame


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        raise SystemExit(__doc__)
    src, out = Path(args[0]), Path(args[1])
    frame = golden_frame(src)
    if "--logbook" in args:
        Run(metrics=frame, meta=RunMeta(name=src.stem, format="golden")).write(out)
    else:
        frame.write_ndjson(out)
    print(f"wrote {out}: {frame.height} records, steps {frame['step'][0]}..{frame['step'][-1]}")


if __name__ == "__main__":
    main()
