"""Generic metrics JSONL: one JSON object per line, as many trainers write ``run.jsonl``.

Common key spellings map to the canonical columns (see ``parsers.jsonl.columns``):
``step|iteration|global_step|num_updates|_step|iter`` -> ``step``,
``loss|train/loss|train_loss|lm_loss|lm loss|train/lm_loss`` -> ``loss`` (taken as
nats: the file says nothing about units), ``lr|learning_rate|optim/lr|train/lr``,
``grad_norm|gnorm|optim/total_grad_norm|train/grad_norm``, ``loss_scale|scale``, and
``time|timestamp|_timestamp`` (unix seconds, or ISO 8601) -> ``time``. Other numeric keys
are kept as snake_case columns, nested objects flattened with ``/`` first
(``{"train": {"z_loss": 1}}`` and ``"train/z_loss"`` both -> ``train_z_loss``).
``NaN``/``Infinity``/``-Infinity`` are read bare (as Python's ``json`` writes them) and
as strings; a ``null`` written for the loss or the grad norm (what many writers put for a
NaN, since JSON has none) is a ``nonfinite`` event on its record, in a file that logs that
metric elsewhere. Evaluation-only rows become ``validation`` events (see
``parsers.jsonl.table``). Blank lines, ``#``/``//`` comments, objects without a
number and step-less objects in a file with steps (a config line) are ignored; lines
that are not one JSON object are unrecognized.

logbook's own JSONL (first line ``{"type": "run", "schema": "logbook/1", ...}``) is not
this format: ``sniff`` leaves it to the ``logbook`` format.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Nonfinite, Source, Validation
from parsers import json_decode as jd
from parsers.columns import snake, with_core
from parsers.jsonl import columns as jc
from parsers.jsonl.table import build, shared_alias
from parsers.reader import Spec
from parsers.reader.records import epoch_counter
from parsers.relaunches import relaunches

NAME = "jsonl"
DESCRIPTION = "generic metrics JSONL (one JSON object per line: step, loss, lr, ...)"
EXAMPLE = '{"step": 100, "loss": 2.31, "lr": 0.0003, "grad_norm": 0.92, "time": 1700000000.5}'
MAPS = jc.MAPS

_SPACE = " \t\ufeff"  # a byte-order mark at the start of the file is no content
_STEP_OR_LOSS = {snake(a) for a in jc.ALIASES["step"] + jc.ALIASES["loss"]}


SNIFF_MAX = 80  # the highest score sniff gives


# a JSON log whose records are text messages (``{"message": "step 10 loss 2.3"}``): read
# by the tolerant reader when no object has a step or a loss of its own
TOLERANT_ALONE = Spec()


def sniff(head: list[str]) -> int:
    """80 when most lines are JSON objects and one has a numeric step or loss, 60 when
    they are objects without (or with text-valued) step and loss, 0 for logbook files."""
    body = [h.strip(_SPACE) for h in head]
    body = [h for h in body if h and not h.startswith(("#", "//"))]
    if not body or body[0].replace(" ", "").startswith('{"type":"run","schema":"logbook/'):
        return 0
    body = body[:200]
    if len(body) > 1 and _loads(body[-1]) is None:
        body = body[:-1]  # the head may end inside a line
    objects = [o for o in (_loads(h) for h in body) if isinstance(o, dict)]
    if len(objects) * 2 <= len(body):
        return 0
    for obj in objects:
        flat = _flatten(obj)
        if any(snake(k) in _STEP_OR_LOSS and _is_number(v) for k, v in flat.items()):
            return 80
    return 60


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested beyond the decoder's depth
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


_EXACT = {snake(a) for a in jc.ALIASES["step"]}


def _exact_key(key: str) -> bool:
    """A key of step numbers: kept exact (a JSON number beyond 2^53 is not a float)."""
    return snake(key) in _EXACT


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    stripped = lines.get_column("text").str.strip_chars(_SPACE)
    blank = stripped.str.len_bytes() == 0
    comment = stripped.str.starts_with("#") | stripped.str.starts_with("//")
    is_obj = stripped.str.starts_with("{") & ~comment
    cand = lines.filter(is_obj).with_columns(stripped.filter(is_obj).alias("text"))
    payload = cand.get_column("text")
    frame, slow, bad = jd.decode(jd.quote_nonfinite(payload), original=payload, exact=_exact_key)
    flat, paths = jc.flatten(frame)
    # lists, booleans and nulls-only hold no metric: drop them before mixing in text rows
    flat = flat.select(c for c, t in flat.schema.items() if t.is_numeric() or t == pl.String)
    raw = _merge(flat, slow)
    line = cand.get_column("line")[raw.get_column(jd.ROW)]
    table = build(raw.drop(jd.ROW), paths, line)
    texts = dict(cand.join(table.evals.select("line"), on="line").select("line", "text").rows())
    events = _validations(table.evals, texts, name) + _null_values(cand, table.metrics, name)
    unrec = np.concatenate(
        [
            lines.filter(~blank & ~comment & ~is_obj).get_column("line").to_numpy(),
            cand.get_column("line").to_numpy()[bad] if bad.size else np.zeros(0, np.int64),
        ]
    )
    ignored = int((blank | comment).sum()) + table.ignored
    metrics, caveats = _epochs_as_steps(table.metrics)
    events += relaunches(metrics, name)
    metrics, within = _within_epochs(metrics)
    if within:
        caveats.append(within)
        _steps_before(events, metrics)
    return Parsed(
        metrics=with_core(metrics),
        events=events,
        meta={"caveats": caveats} if caveats else {},
        unrecognized=pl.Series("line", np.sort(unrec), dtype=pl.Int64),
        ignored=ignored,
    )


def _epochs_as_steps(metrics: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """A file with no step but a whole-number ``epoch`` on every record (MAE's and
    DeiT's ``log.txt``: a line per epoch) counts its records by epoch."""
    has_step = "step" in metrics.columns and metrics.get_column("step").is_not_null().any()
    if has_step or "epoch" not in metrics.columns or metrics.height == 0:
        return metrics, []
    epoch = metrics.get_column("epoch").cast(pl.Float64, strict=False)
    if epoch.null_count() or not bool((epoch == epoch.round()).all()) or epoch.min() < 0:
        return metrics, []
    return metrics.with_columns(epoch.cast(pl.Int64).alias("step")), [
        "no step in the file: the epoch is the step (a record per epoch)"
    ]


def _within_epochs(metrics: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """A step that counts within each epoch (mmcv's ``"epoch": 3, "iter": 50``) counted
    over the epochs (see :func:`parsers.reader.records.epoch_counter`), and its caveat."""
    if not {"epoch", "step"} <= set(metrics.columns):
        return metrics, None
    counted = epoch_counter(metrics)
    if "_epoch_len" not in counted.columns:
        return metrics, None
    n = int(counted.get_column("_epoch_len")[0])
    how = "as the log states it" if n < 0 else "the largest step printed in one"
    caveat = (
        f"the step counts within each epoch: counted over the epochs with {abs(n)} steps "
        f"an epoch ({how})"
    )
    return counted.drop("_epoch_len"), caveat


def _steps_before(events: list[EventBase], metrics: pl.DataFrame) -> None:
    """Each validation at the step of the last record before it (its own counter is the
    epoch's, or the evaluation's)."""
    lines = metrics.get_column("line").to_numpy()
    steps = metrics.get_column("step").to_numpy()
    for ev in events:
        if ev.kind != "validation" or ev.source is None or ev.source.line is None:
            continue
        i = int(np.searchsorted(lines, ev.source.line)) - 1
        ev.step = int(steps[i]) if i >= 0 else None


_NULL_KEY = r'"([^"\\]{1,200})"\s*:\s*null\b'
_NULL_WATCHED = ("loss", "grad_norm")


def _null_values(cand: pl.DataFrame, metrics: pl.DataFrame, name: str) -> list[EventBase]:
    """A ``null`` written for the loss or the grad norm, in a file that logs that metric
    (JSON has no NaN: many writers put ``null`` where the value was NaN or inf): a
    ``nonfinite`` event (value ``null``) on the record."""
    watched = [c for c in _NULL_WATCHED if c in metrics.columns]
    watched = [c for c in watched if metrics.get_column(c).is_not_null().any()]
    if not watched or metrics.height == 0:
        return []
    texts = cand.filter(pl.col("text").str.contains("null", literal=True))
    if texts.height == 0:
        return []
    keys = texts.select("line", pl.col("text").str.extract_all(_NULL_KEY).alias("k"))
    recs = metrics.select("line", "step", "time", *watched)
    got = keys.join(recs, on="line", how="inner")
    out: list[EventBase] = []
    for row in got.iter_rows(named=True):
        said = {_column_of(k) for k in row["k"]}
        for col in watched:
            if col in said and row[col] is None:
                out.append(
                    Nonfinite(
                        step=row["step"],
                        time=row["time"],
                        metric=col,
                        value="null",
                        source=Source(file=name, line=row["line"]),  # the record's line
                    )
                )
    return out


_NULL_KEYS = {snake(a): col for col in _NULL_WATCHED for a in jc.ALIASES[col]}


def _column_of(match: str) -> str | None:
    """The watched column a ``"key": null`` match names (its key's last part)."""
    key = match.split('"')[1] if '"' in match else match
    sn = snake(key.rsplit("/", 1)[-1].rsplit(".", 1)[-1])
    col = _NULL_KEYS.get(sn) or shared_alias(sn)
    return col if col in _NULL_WATCHED else None


def _merge(frame: pl.DataFrame, slow: list[dict[str, Any]]) -> pl.DataFrame:
    """Add the rows only Python's ``json`` could read (values as text)."""
    if not slow:
        return frame
    rows = []
    for s in slow:
        flat = _flatten(s["obj"])
        rows.append({jd.ROW: s[jd.ROW], **{k: _text(v) for k, v in flat.items()}})
    extra = pl.DataFrame(rows, schema_overrides={jd.ROW: pl.Int64}, infer_schema_length=None)
    extra = extra.with_columns(pl.exclude(jd.ROW).cast(pl.String))
    return pl.concat([frame, extra], how="diagonal_relaxed").sort(jd.ROW)


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool) or not _is_number(v):
        return json.dumps(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return repr(v)


def _validations(evals: pl.DataFrame, texts: dict[int, str], name: str) -> list[EventBase]:
    out: list[EventBase] = []
    cols = [c for c in evals.columns if c not in ("line", "time", "step")]
    for row in evals.iter_rows(named=True):
        present = {c: row[c] for c in cols if row[c] is not None}
        splits = {jc.EVAL.match(c).group(1) for c in present}
        split = splits.pop() if len(splits) == 1 else None
        values = {(c.split("_", 1)[1] if split else c): v for c, v in present.items()}
        out.append(
            Validation(
                step=row.get("step"),
                time=row["time"],
                split=split,
                values=values,
                source=Source(file=name, line=row["line"]),
                text=texts.get(row["line"]),
            )
        )
    return out
