"""Sacred's ``metrics.json`` (its FileStorageObserver's ``my_runs/<id>/metrics.json``):
a block per metric of three parallel lists::

    {"loss": {"steps": [0, 1, 2], "timestamps": ["2023-10-10T07:12:22.428417", ...],
              "values": [0.69, 0.61, 0.57]}, ...}

A step with a value in any metric is one record (its time the latest of its
timestamps), at the line that lists the step in the first block; the metrics keep their
names, the usual ones mapped (``loss``, ``learning_rate`` -> ``lr``, ...). A value that
is no number (``null``, a string) is left empty.
"""

from __future__ import annotations

import re
from datetime import datetime

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from parsers.columns import whole_counts, with_core
from parsers.json_decode import whole_file
from parsers.reader import aliases

NAME = "sacred"
DESCRIPTION = "Sacred's metrics.json (a block of steps, timestamps and values per metric)"
EXAMPLE = '{"loss": {"steps": [0, 1], "timestamps": ["2023-10-10T07:12:22.428417", ...], ...'
MAPS = "each block's name->its column (loss, lr, ... by name); its steps->step"
SNIFF_MAX = 92
_KEYS = ('"steps"', '"timestamps"', '"values"')
_STEP_LINE = re.compile(r"^\s*(-?\d{1,18}),?\s*$")


def sniff(head: list[str]) -> int:
    """92 when the head opens a JSON object whose blocks hold the three lists."""
    body = [h for h in head[:400] if not h.lstrip().startswith("#")]
    text = "\n".join(body)
    return SNIFF_MAX if text.lstrip().startswith("{") and all(k in text for k in _KEYS) else 0


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        return float(v)
    except OverflowError:  # (an integer beyond a float)
        return None


def _time(v: object) -> datetime | None:
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        return None
    return t if t.tzinfo is None else t.replace(tzinfo=None)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    texts = lines.get_column("text").to_list()
    numbers = lines.get_column("line").to_list()
    data = whole_file(texts, name, "Sacred metrics.json")
    if not isinstance(data, dict):
        raise InputError(f"{name}: not a Sacred metrics.json (no metric blocks)")
    columns: dict[str, dict[int, float | None]] = {}
    times: dict[int, datetime] = {}
    for metric, block in data.items():
        if not isinstance(block, dict) or not isinstance(block.get("steps"), list):
            continue
        steps, values = block.get("steps") or [], block.get("values") or []
        stamps = block.get("timestamps") or []
        col = aliases.canonical(metric) or aliases.column_of(metric)
        if col in ("step", "line", "time", "segment", "source"):
            col = f"{col}_{aliases.norm(metric)}"
        got = columns.setdefault(col, {})
        for k, step in enumerate(steps):
            if isinstance(step, bool) or not isinstance(step, int) or abs(step) > 2**62:
                continue
            got[step] = _number(values[k]) if k < len(values) else None
            t = _time(stamps[k]) if k < len(stamps) else None
            if t is not None and (step not in times or t > times[step]):
                times[step] = t
    if not columns:
        raise InputError(f"{name}: not a Sacred metrics.json (no block of steps and values)")
    steps = sorted({s for v in columns.values() for s in v})
    at = _step_lines(texts, numbers)
    rows = {
        "line": [at.get(s, numbers[0]) for s in steps],
        "step": steps,
        "time": [times.get(s) for s in steps],
    }
    for col, got in columns.items():
        rows[col] = [got.get(s) for s in steps]
    schema = {"line": pl.Int64, "step": pl.Int64, "time": pl.Datetime("us")}
    schema |= {c: pl.Float64 for c in columns}
    metrics = pl.DataFrame(rows, schema=schema).with_columns(
        pl.col("time").dt.replace_time_zone("UTC")
    )
    # each record at its own line where the first block lists every step once; else
    # all of them at the first block's line (the stitcher needs them in order)
    if metrics.get_column("line").n_unique() != metrics.height:
        metrics = metrics.with_columns(pl.lit(numbers[0], pl.Int64).alias("line"))
    comments = sum(1 for t in texts if t.lstrip().startswith("#"))
    return Parsed(
        metrics=with_core(whole_counts(metrics)).sort("line", "step"),
        meta={"caveats": ["a Sacred metrics.json: a record a step of any metric"]},
        ignored=comments,
    )


def _step_lines(texts: list[str], numbers: list[int]) -> dict[int, int]:
    """{step: line} of the first block's ``"steps"`` list, one number a line."""
    out: dict[int, int] = {}
    inside = False
    for t, n in zip(texts, numbers, strict=True):
        if not inside:
            inside = '"steps"' in t and "[" in t and "]" not in t
            continue
        if "]" in t:
            break
        m = _STEP_LINE.match(t)
        if m:
            out.setdefault(int(m.group(1)), n)
    return out
