"""Plain metric tables: CSV or TSV with a header (``step,loss,lr,...``), as training
scripts write them next to their logs, markdown tables as a notebook's progress table
is pasted (``| Step | Training Loss |``), and Parquet tables that are not logbook's own.

The step is the column the alias table calls the step (``step``, ``iteration``,
``global_step``, ...); a table with none but an ``epoch`` column is a per-epoch table
whose epochs are its steps (a caveat says so). Other columns go through the alias table
(``train/loss`` -> ``loss``, ``x/lr`` -> ``lr``); columns without a number stay out.
Collector ``#`` comments above the header are ignored.

A sweep's table with a column per run and nothing else, the headers one name and the
value that tells the runs apart (``learning_rate_0.005,learning_rate_0.01,...``) over
rows of numbers only, holds one run per column: row k is step k of every run, and the
values, which no header names as a metric, are read as each run's loss (a caveat says
both). An empty cell is no record of that run.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from logbook.schema import Source, Validation
from parsers import tags as tt
from parsers.columns import table_columns, with_core
from parsers.reader import aliases
from parsers.reader.numbers import to_float
from parsers.relaunches import relaunches

NAME = "csv"
DESCRIPTION = "a plain metrics table: CSV/TSV with a header (step,loss,lr,...) or Parquet"
EXAMPLE = "step,loss,lr,grad_norm"
MAPS = (
    "the step column (step/iteration/global_step/..., else epoch) -> step; other headers "
    "through the alias table (loss/train_loss/train/loss->loss, lr/learning_rate/x/lr->lr, ...)"
)
SNIFF_MAX = 60
_SEPARATORS = (",", "\t", "|")


_RULE = r"^\s*\|?\s*:?-{3,}"  # a markdown table's rule under its header: |---|---|
# the columns of a long table (normalized names), the first found
_LONG_METRIC = ("metric", "metric_name", "key")
_LONG_VALUE = ("value", "metric_value")
_LONG_RUN = ("run", "run_name", "run_id")
# a first column that names each row's run in a table of several runs
_RUN_NAMES = {"run", "run_name", "run_id", "model", "experiment", "exp", "name", "config"}


def _piped(line: str) -> str:
    """A markdown table row without its outer pipes: ``| 10 | 2.3 |`` -> ``10 | 2.3``."""
    return line.strip().removeprefix("|").removesuffix("|")


def _header(head: list[str]) -> tuple[list[str], str, list[str]] | None:
    body = [h for h in head if h.strip() and not h.startswith("#") and not re.match(_RULE, h)]
    if len(body) < 2:
        return None
    if body[0].lstrip().startswith("|"):  # a markdown table (a notebook's, pasted)
        body = [_piped(b) for b in body]
    for sep in _SEPARATORS:
        cols = [c.strip().strip('"').strip() for c in body[0].split(sep)]
        if len(cols) >= 2 and all(b.count(sep) == len(cols) - 1 for b in body[1:20]):
            return cols, sep, body[1:]
    return None


_INDEX = ("", "unnamed: 0", "index")  # the first column pandas' ``to_csv`` writes


# the headers of a column-per-run table: one name, then what tells the runs apart
_SWEPT = re.compile(r"^(.*?[A-Za-z][^\d]*?[_=\-: ])([^_=\-: ]+)$")


def _per_run(cols: list[str]) -> str | None:
    """The name the headers share, in a table with a column per run: two or more
    headers ``<name><sep><value>`` of one name and distinct values, none a metric or a
    step of the alias table."""
    if len(cols) < 2 or any(aliases.canonical(c) for c in cols):
        return None
    found = [_SWEPT.match(c.strip()) for c in cols]
    if not all(found):
        return None
    names = {m.group(1) for m in found if m}
    values = [m.group(2) for m in found if m]
    if len(names) != 1 or len(set(values)) != len(values):
        return None
    return names.pop()


def _step_column(cols: list[str]) -> str | None:
    steps = [c for c in cols if aliases.canonical(c) == aliases.STEP]
    if steps:
        return steps[0]
    epoch = next((c for c in cols if aliases.norm(c) == "epoch"), None)
    if epoch is None and cols and cols[0].strip().lower() in _INDEX:
        return cols[0]  # a DataFrame's index: its row numbers
    return epoch


def _long_form(cols: list[str]) -> tuple[str, str, str | None] | None:
    """(metric column, value column, run column) of a table in long form, one row per
    run, metric and step (MLflow's export: ``Run,Run ID,metric,step,timestamp,value``)."""
    by_norm = {aliases.norm(c): c for c in cols}
    metric = next((by_norm[k] for k in _LONG_METRIC if k in by_norm), None)
    value = next((by_norm[k] for k in _LONG_VALUE if k in by_norm), None)
    if metric is None or value is None:
        return None
    return metric, value, next((by_norm[k] for k in _LONG_RUN if k in by_norm), None)


# a cell of a table of numbers only: a number, nan, inf, or empty (nothing logged)
_PLAIN = r"\s*\"?(?:[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|nan|inf))?\"?\s*"


def sniff(head: list[str]) -> int:
    """60 for a header with a step (or epoch) column and a loss-like column (or the
    metric and value columns of a long table), over rows of as many fields; 40 for a
    loss-like column without a step column over rows of numbers only (row k: step k), or
    for a column per run over such rows."""
    found = _header(head)
    if found is None:
        return 0
    cols, sep, rows = found
    if [c.lower() for c in cols] == _TB_EXPORT:
        return SNIFF_MAX
    lossy = any("loss" in c.lower() for c in cols) or _long_form(cols) is not None
    if not lossy and _per_run(cols) is None:
        return 0
    named = _run_column(cols) is not None  # (rows then start with a run's name)
    # (a row may start with empty cells: Stable-Baselines3's evaluation rows ``,,10000,``)
    numeric = all(re.match(r"^\s*\"?[-+.\d]", r.lstrip(sep + " ")) for r in rows[:20])
    if _step_column(cols) is None:
        values = [v for r in rows[:20] for v in r.split(sep)]
        plain = all(re.fullmatch(_PLAIN, v, re.IGNORECASE) for v in values)
        return 40 if plain and len(rows) >= 2 and _long_form(cols) is None else 0
    if _long_form(cols) is None and not named and not numeric:
        return 0
    return SNIFF_MAX


# TensorBoard's "Download CSV" of one scalar tag: ``Wall time,Step,Value``, the tag in
# the file's name (``run-train-tag-epoch_loss.csv``; a ``/`` in the tag written ``_``)
_TB_EXPORT = ["wall time", "step", "value"]
_TB_TAG = re.compile(r"-tag-(.+?)(?:\.[ct]sv)?$")
_TB_PREFIXES = ("epoch_", "batch_", "train_", "training_")  # Keras' ``epoch_loss``


def _tensorboard_export(raw: pl.DataFrame, name: str) -> tuple[pl.DataFrame, str]:
    """One tag's TensorBoard export as a table: the value under the tag's name (the
    canonical one where a known prefix hides it: ``epoch_loss`` -> ``loss``; a file
    named otherwise: the value read as the loss), the wall time (unix seconds) as the
    record's time; and the caveat that says so."""
    m = _TB_TAG.search(Path(name).name)
    tag = m.group(1) if m else None
    col = tag
    if tag is not None and aliases.canonical(tag) is None:
        for prefix in _TB_PREFIXES:
            rest = tag.removeprefix(prefix)
            if rest != tag and aliases.canonical(rest) is not None:
                col = aliases.canonical(rest)
                break
    caveat = f"a TensorBoard export of the tag {tag!r}: its Value read as {col!r}"
    if tag is None:
        col = "loss"
        caveat = (
            "a TensorBoard export (Wall time,Step,Value) whose file names no tag: read as the loss"
        )
    wall, step, value = raw.columns[:3]
    seconds = to_float(pl.col(wall).str.strip_chars())
    ok = seconds.is_finite() & (seconds > 0) & (seconds < 32_503_680_000)  # (year 3000)
    time = pl.when(ok).then(pl.from_epoch((seconds * 1e6).cast(pl.Int64, strict=False), "us"))
    out = raw.select(
        pl.col("line"),
        pl.col(step).alias("Step"),
        pl.col(value).alias(col),
        time.dt.replace_time_zone("UTC").alias("_time"),
    )
    return out, caveat


def _run_column(cols: list[str]) -> str | None:
    """The first column, where it names each row's run (``model,step,train_loss``)."""
    return cols[0] if cols and aliases.norm(cols[0]) in _RUN_NAMES else None


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    text = lines.get_column("text")
    skip = text.str.starts_with("#") | (text.str.strip_chars() == "") | text.str.contains(_RULE)
    body = lines.filter(~skip)
    if body.height and body.get_column("text")[0].lstrip().startswith("|"):
        piped = pl.col("text").str.strip_chars().str.strip_prefix("|").str.strip_suffix("|")
        body = body.with_columns(piped)
    found = _header(body.get_column("text").head(50).to_list())
    if found is None:
        raise InputError(f"{name}: not a readable metrics table")
    _, sep, _ = found
    payload = "\n".join(body.get_column("text").to_list()) + "\n"
    try:
        raw = pl.read_csv(io.StringIO(payload), separator=sep, infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{name}: not a readable metrics table ({type(exc).__name__})") from None
    raw = raw.rename({c: c.strip() for c in raw.columns})
    raw = raw.with_columns(body.get_column("line").slice(1, raw.height).alias("line"))
    exported = [c.lower() for c in raw.columns if c != "line"] == _TB_EXPORT
    tb_caveat, tb_time = None, None
    if exported:
        raw, tb_caveat = _tensorboard_export(raw, name)
        tb_time = raw.get_column("_time")
        raw = raw.drop("_time")
    long = _long_form([c for c in raw.columns if c != "line"])
    if long is not None:
        raw = _wide(raw, *long)
    elif (run := _run_column(raw.columns)) is not None:
        raw = raw.rename({run: "_run"})
    cols = [c for c in raw.columns if c != "line"]
    per_run = _per_run(cols) if long is None and _step_column(cols) is None else None
    if per_run is not None:
        raw = _runs_of_columns(raw, cols)
    metrics, caveats = table_metrics(raw)
    if tb_time is not None:
        metrics = metrics.with_columns(tb_time.cast(metrics.schema["time"]).alias("time"))
        caveats.append(tb_caveat)
    metrics, evals = _validation_rows(metrics, name)
    if per_run is not None:
        caveats = [
            f"a column per run ({len(cols)} runs: {cols[0]}, ...), no step column: row k is "
            f"step k of every run; no header names the metric: the values read as the loss"
        ]
    events = [*evals, *relaunches(metrics, name)]
    return Parsed(
        metrics=metrics, events=events, meta={"caveats": caveats}, ignored=int(skip.sum()) + 1
    )


def _validation_rows(metrics: pl.DataFrame, name: str) -> tuple[pl.DataFrame, list]:
    """Rows with evaluation values (``val_loss``, ``eval/acc``) and no training loss, in
    a table whose other rows carry one (``500,,0.2445,`` beside ``500,0.4234,,5.9e-05``):
    validation events, not records."""
    evals = [c for c in metrics.columns if tt.eval_split(c) is not None]
    if not evals or "loss" not in metrics.columns or metrics.get_column("loss").is_null().all():
        return metrics, []
    is_eval = pl.col("loss").is_null() & pl.any_horizontal(pl.col(evals).is_not_null())
    rows = metrics.filter(is_eval)
    if rows.height == 0:
        return metrics, []
    out = []
    for row in rows.select("line", "step", *evals).iter_rows(named=True):
        present = {c: row[c] for c in evals if row[c] is not None}
        splits = {tt.eval_split(c) for c in present}
        split = splits.pop() if len(splits) == 1 else None
        values = {(tt.eval_key(c, split) if split else c): v for c, v in present.items()}
        src = Source(file=name, line=row["line"])
        out.append(Validation(step=row["step"], split=split, values=values, source=src))
    return metrics.filter(~is_eval), out


def _runs_of_columns(raw: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """A column-per-run table as rows of (line, step, loss, _run), in line order; an
    empty cell is no row."""
    numbered = raw.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("step"))
    long = numbered.unpivot(
        on=cols, index=["line", "step"], variable_name="_run", value_name="loss"
    )
    filled = pl.col("loss").is_not_null() & (pl.col("loss").str.strip_chars() != "")
    return long.filter(filled).sort("line", maintain_order=True)


def _wide(raw: pl.DataFrame, metric: str, value: str, run: str | None) -> pl.DataFrame:
    """A long table as a wide one: a row per run and step (at the line of its first
    value), a column per metric; the run's name in ``_run``."""
    step = _step_column([c for c in raw.columns if c not in (metric, value, run, "line")])
    if step is None:
        return raw
    index = [c for c in (run, step) if c is not None]
    rows = raw.group_by([*index, metric], maintain_order=True).agg(
        pl.col(value).first(), pl.col("line").min()
    )
    lines = rows.group_by(index, maintain_order=True).agg(pl.col("line").min())
    wide = rows.pivot(on=metric, index=index, values=value, aggregate_function="first")
    wide = lines.join(wide, on=index, how="left", maintain_order="left").sort("line")
    return wide.rename({run: "_run"}) if run is not None else wide


def table_metrics(raw: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """A table of text or number columns (plus ``line``, and ``_run`` where it names
    each row's run) as canonical metrics."""
    cols = [c for c in raw.columns if c not in ("line", "_run")]
    step = _step_column(cols)
    caveats = []
    exprs: dict[str, pl.Expr] = {}
    if step is None:
        caveats.append("no step column: rows numbered 1.. as the steps (one row a step)")
        exprs["step"] = pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("step")
    elif step.strip().lower() in _INDEX:
        caveats.append(
            f"no step column: the unnamed first column {step!r} (a row index) is the step"
        )
    elif aliases.canonical(step) != aliases.STEP:
        caveats.append(f"no step column: the {step!r} column is the step (one row an epoch)")
    for c in cols:
        value = pl.col(c).cast(pl.String).str.strip_chars().str.strip_chars('"')
        number = to_float(value)
        if c == step:
            exprs["step"] = number.round(0).cast(pl.Int64, strict=False).alias("step")
            continue
        canon = aliases.canonical(c) or aliases.column_of(c)
        if canon in exprs or canon == "step":
            canon = aliases.column_of(c)
        if canon not in exprs:
            exprs[canon] = number.alias(canon)
    runs = [pl.col("_run").cast(pl.String)] if "_run" in raw.columns else []
    out = raw.select(pl.col("line"), *exprs.values(), *runs)
    keep = [c for c in out.columns if c in ("line", "step", "_run") or out[c].is_not_null().any()]
    return with_core(out.select(keep)), caveats


def sniff_path(path: Path) -> int:
    """60 for a Parquet table with a step column and no logbook header."""
    cols = table_columns(path)
    return SNIFF_MAX if cols and _step_column(cols) else 0


def read_path(path: Path) -> list[Parsed]:
    try:
        raw = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{path}: not a readable Parquet table ({type(exc).__name__})") from None
    raw = raw.with_columns(pl.int_range(1, raw.height + 1, dtype=pl.Int64).alias("line"))
    metrics, caveats = table_metrics(raw)
    meta = {"file": str(path), "lines": raw.height, "caveats": caveats}
    return [Parsed(metrics=metrics, meta=meta)]
