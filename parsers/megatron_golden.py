"""Megatron-LM's functional-test "golden values" (``golden_values_*.json``): one block
per metric, each with its steps' values::

    {
        "lm loss": {
            "start_step": 1,
            "end_step": 100,
            "step_interval": 1,
            "values": {"1": 10.85, "2": 10.84, ...}
        },
        "num-zeros": {...}
    }

``values`` is an object keyed by step (newer files) or a list from ``start_step`` every
``step_interval`` (older ones; from step 1 every step where a copy gives neither, as
FlagScale's ``{"lm loss:": {"values": [...]}}``). The string ``"nan"`` stands for a step
the job did not run (the second job of a resume test lists the first job's steps that
way): such a step is no record unless another metric has a value there; a JSON ``NaN``
is a real NaN.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from parsers.columns import with_core
from parsers.json_decode import whole_file
from parsers.reader import aliases

NAME = "megatron-golden"
DESCRIPTION = "Megatron-LM functional-test golden values (golden_values_*.json)"
EXAMPLE = '{"lm loss": {"start_step": 1, "end_step": 100, "step_interval": 1, "values": {}}}'
MAPS = "lm loss->loss, num-zeros->num_zeros, other metrics in snake_case; steps as keyed"
SNIFF_MAX = 95

_KEYS = ('"start_step"', '"step_interval"', '"values"')
_VALUE_LINE = re.compile(r'^\s*"(\d+)"\s*:\s*(?=[-+\d.NI])')  # a step keyed to a number
_PLACEHOLDER = "nan"


# FlagScale's copies list the values alone: ``{"lm loss:": {"values": [12.3, ...]}}``
_BARE = re.compile(r'^\s*\{\s*"lm[ _-]loss:?"\s*:\s*\{\s*"values"\s*:\s*\[')


def sniff(head: list[str]) -> int:
    """95 when the head shows a metric block's three keys, or an ``lm loss`` block of
    values alone; else 0."""
    text = "\n".join(head[:200])
    body = "\n".join(h for h in head[:200] if not h.startswith("#"))  # (a collector's note)
    if all(k in text for k in _KEYS) or _BARE.match(body):
        return SNIFF_MAX
    return 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    """One record per step with a value in any metric, at the line of its first value."""
    texts = lines.get_column("text").to_list()
    data = whole_file(texts, name, "golden-values file")
    if not isinstance(data, dict) or not data:
        raise InputError(f"{name}: not a golden-values file (no metric blocks)")
    columns: dict[str, dict[int, float]] = {}
    for metric, block in data.items():
        if isinstance(block, dict):
            values = _values(block)
            if values:
                columns[_column(metric)] = values
    steps = sorted({s for v in columns.values() for s in v})
    first_line, used = _first_lines(texts)
    # (values in a list: every record at the line that opens the first list)
    at = next((i for i, t in enumerate(texts, start=1) if '"values"' in t), 1)
    rows = {"line": [first_line.get(s, at) for s in steps], "step": steps}
    for col, values in columns.items():
        rows[col] = [values.get(s) for s in steps]
    schema = {"line": pl.Int64, "step": pl.Int64} | {c: pl.Float64 for c in columns}
    metrics = pl.DataFrame(rows, schema=schema)
    used |= set(rows["line"])
    placeholders = sum(len(b.get("values") or {}) for b in data.values() if isinstance(b, dict))
    skipped = placeholders - sum(len(v) for v in columns.values())
    caveats = ["golden values of a Megatron-LM functional test, not a training log"]
    if skipped > 0:
        caveats.append(f'{skipped} value(s) given as "nan": steps the job did not run, left out')
    return Parsed(
        metrics=with_core(metrics),
        meta={"caveats": caveats},
        ignored=lines.height - len(used),
    )


def _values(block: dict[str, Any]) -> dict[int, float]:
    """A metric block's values by step, placeholders left out."""
    raw = block.get("values")
    if isinstance(raw, dict):
        pairs = [(k, v) for k, v in raw.items() if str(k).isdigit()]
    elif isinstance(raw, list):
        # (a list without its start: Megatron counts iterations from 1)
        start, every = block.get("start_step", 1), block.get("step_interval", 1)
        if not isinstance(start, int) or not isinstance(every, int) or every <= 0:
            return {}
        pairs = [(start + i * every, v) for i, v in enumerate(raw)]
    else:
        return {}
    out: dict[int, float] = {}
    for k, v in pairs:
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue  # "nan" (a step not run) or anything else that is no number
        if isinstance(k, str) and len(k.strip()) > 19:
            continue  # a step beyond 64 bits (a damaged file) is no step
        step = int(k)
        if step < 2**63:
            out[step] = float(v)
    return out


def _column(metric: str) -> str:
    return aliases.canonical(metric) or aliases.column_of(metric)


def _first_lines(texts: list[str]) -> tuple[dict[int, int], set[int]]:
    """The first line where each step is keyed to a value (steps of list values: none),
    and every line that keys a step to a value (the other metrics' values of a record
    continue it)."""
    first: dict[int, int] = {}
    used: set[int] = set()
    for i, t in enumerate(texts, start=1):
        if (m := _VALUE_LINE.match(t)) and len(m.group(1)) <= 19:
            first.setdefault(int(m.group(1)), i)
            used.add(i)
    return first, used
