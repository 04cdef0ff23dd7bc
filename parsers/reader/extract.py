"""The reader's passes over a file: clean, shape, template, extract, account."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers.reader import Spec, aliases, events
from parsers.reader.clean import STAMP, cleaned, stamp_times
from parsers.reader.numbers import NUMBER, to_float, to_int
from parsers.reader.templates import Template, template, truncated

# shapes read in Python, at most (the most frequent first): records repeat
MAX_SHAPES = 20_000
DURATION = r"\b(?:\d+ days?, )?\d{1,3}:\d{2}(?::\d{2})?(?:\.\d+)?\b"
BAR = r"[\u2580-\u259f\u2588]+"  # the blocks of a progress bar
COMMENT = r"^#(?:\s|$|-{3,})|^\[\.\.\.\]$|^\(\.\.\.\)$|^\.\.\.$"
_LOGGING_STEPS = r"logging_steps\s*[=:]\s*(\d+)"
_EXAMPLE_MAX = 4000
_CUT_MAX = 2  # lines of one shape that may be records cut short (a paste's end, a kill)


def prepared(lines: pl.DataFrame, spec: Spec) -> pl.DataFrame:
    """Lines with ``s`` (cleaned), ``stamp``, ``body`` (values only) and ``shape``."""
    df = lines.select("line", "text").with_columns(cleaned(pl.col("text")))
    for pattern, repl in spec.rewrite:
        df = df.with_columns(pl.col("s").str.replace_all(pattern, repl))
    body = (
        pl.col("s")
        .str.replace_all(STAMP, " <time> ")
        .str.replace_all(DURATION, "<dur>")
        .str.replace_all(BAR, "")
    )
    df = df.with_columns(body.alias("body"))
    shape = pl.col("body").str.replace_all(NUMBER, "#").str.replace_all(r"\s+", " ")
    return df.with_columns(shape.str.strip_chars().alias("shape"))


def templates_of(df: pl.DataFrame, spec: Spec) -> dict[str, Template]:
    """One template per shape that holds a value."""
    shapes = (
        df.filter(pl.col("shape").str.contains("#", literal=True))
        .group_by("shape")
        .agg(pl.col("body").first().alias("example"), pl.len().alias("n"))
        .sort(["n", "shape"], descending=[True, False])
        .head(MAX_SHAPES)
    )
    out = {}
    for shape, example, n in shapes.iter_rows():
        out[shape] = template(shape, example[:_EXAMPLE_MAX], spec.aliases, spec.any_value)
        out[shape].count = n
    return out


def count_records(head: list[str], spec: Spec) -> int:
    """Records among the first lines (for sniffing)."""
    if not head:
        return 0
    frame = pl.DataFrame({"line": range(1, len(head) + 1), "text": head})
    df = prepared(frame, spec)
    temps = templates_of(df, spec)
    kinds = {s for s, t in temps.items() if t.kind == "record"}
    return df.filter(pl.col("shape").is_in(list(kinds))).height if kinds else 0


def read_frame(lines: pl.DataFrame, name: str, spec: Spec) -> Parsed:
    df = prepared(lines, spec)
    temps = templates_of(df, spec)
    if spec.keep is not None:
        temps = {s: t for s, t in temps.items() if t.kind != "record" or spec.keep(s)}
    _side_records(temps)
    _cut_records(temps)
    kinds = pl.DataFrame(
        {"shape": list(temps), "kind": [t.kind for t in temps.values()]},
        schema={"shape": pl.String, "kind": pl.String},
    )
    df = df.join(kinds, on="shape", how="left", maintain_order="left")
    records, used_lines = _records(df, temps, spec)
    all_lines = set(records.get_column("line").to_list()) if records.height else set()
    records, copies = _dedupe(records)
    rec_lines = set(records.get_column("line").to_list()) if records.height else set()
    copy_lines = all_lines - rec_lines
    meta: dict = {"rank_copies": copies}
    if copies:
        meta["caveats"] = [f"{copies} per-rank copies of records dropped"]
    if records.height and records.get_column("step").null_count() == records.height:
        records = _numbered(records, df, meta)
    taken = rec_lines | used_lines | copy_lines
    evs, event_lines = _events(df, temps, records, name, taken)
    ignored_mask = _ignored(df, spec)
    free = df.filter(~pl.col("line").is_in(list(taken | event_lines)))
    ignored = free.filter(ignored_mask)
    unrec = free.filter(~ignored_mask)
    meta["continued_lines"] = len(used_lines)
    if "_total" in records.columns:
        total = records.get_column("_total").max()
        if total is not None:
            meta["train_iters"] = int(total)
        records = records.drop("_total")
    meta["columns_from"] = _columns_from(temps)
    metrics = spec.convert(records) if spec.convert and records.height else records
    return Parsed(
        metrics=metrics,
        events=evs,
        meta=meta,
        unrecognized=unrec.get_column("line"),
        ignored=ignored.height + len(copy_lines),
    )


def _records(
    df: pl.DataFrame, temps: dict[str, Template], spec: Spec
) -> tuple[pl.DataFrame, set[int]]:
    """The records of every record template, and the lines that hold the rest of a
    record spread over several lines."""
    rows = df.filter(pl.col("kind") == "record")
    frames = []
    if rows.height:
        rows = rows.with_columns(pl.col("body").str.extract_all(NUMBER).alias("nums"))
        for shape, sub in rows.partition_by("shape", as_dict=True, maintain_order=True).items():
            frames.append(_extract(sub, temps[shape[0]], spec))
    multi, continued = _multiline(df, temps)
    if multi is not None:
        frames.append(multi)
    if not frames:
        return _empty(), set()
    out = pl.concat(frames, how="diagonal_relaxed").sort("line")
    return _typed(out), continued


def _side_records(temps: dict[str, Template]) -> None:
    """Where some record shapes carry a loss, a shape without one is a record only
    when it shares most of their columns (the same record with a field missing, as on
    an overflow step); otherwise it is another logger's line (DeepSpeed's ``step=10,
    skipped=0, lr=[...]`` beside Megatron's records)."""
    records = [t for t in temps.values() if t.kind == "record"]
    with_loss = [_cols(t) for t in records if t.has("loss")]
    if not with_loss:
        return
    for t in records:
        if t.has("loss"):
            continue
        cols = _cols(t)
        if not any(len(cols & c) / len(cols | c) >= 0.5 for c in with_loss):
            t.kind = None


def _cut_records(temps: dict[str, Template]) -> None:
    """Lines cut inside a record (the end of a paste, a killed job) read with the
    template of the record they begin."""
    records = [t for t in temps.values() if t.kind == "record"]
    for shape, t in list(temps.items()):
        if t.kind == "validation" or (t.kind == "record" and t.count > _CUT_MAX):
            continue
        full = truncated(shape, records)
        if full is None or full.count < 2 * t.count:
            continue
        fields = [replace(f) for f in full.fields]
        n = shape.count("#")
        if shape.rstrip().endswith("#") or shape.rstrip().endswith('#"'):
            # the line ends inside its last value, which may be cut mid-number: not read
            for f in fields:
                if f.index == n - 1 and f.role != "step":
                    f.column = None
        temps[shape] = Template(shape=shape, kind="record", fields=fields, count=t.count)


def _cols(t: Template) -> set[str]:
    return {f.column for f in t.fields if f.column}


def _empty() -> pl.DataFrame:
    return pl.DataFrame(
        schema={"line": pl.Int64, "step": pl.Int64, "time": pl.Datetime("us", "UTC")}
    )


def _extract(sub: pl.DataFrame, t: Template, spec: Spec) -> pl.DataFrame:
    """One template's rows as columns."""
    exprs: list[pl.Expr] = [pl.col("line"), pl.col("stamp"), pl.lit(t.shape).alias("_shape")]
    nums = pl.col("nums")
    by_role = {}
    for f in t.fields:
        value = nums.list.get(f.index, null_on_oob=True)
        by_role.setdefault(f.role, value)
        if f.column is None or f.role in ("epoch",):
            continue
        if f.column in aliases.INT_COLUMNS:
            exprs.append(
                (to_float(value) * f.scale).round(0).cast(pl.Int64, strict=False).alias(f.column)
                if f.column != "step"
                else to_int(value).alias("step")
            )
        else:
            exprs.append((to_float(value) * f.scale).alias(f.column))
    if "epoch" in by_role:
        exprs.append(to_float(by_role["epoch"]).alias("epoch"))
    epoch_steps = spec.epoch_steps and t.step_field() is None
    if epoch_steps and "epoch" in by_role and "position" in by_role:
        total = by_role.get("total")
        epoch = to_int(by_role["epoch"]) - spec.epoch_base
        pos = to_int(by_role["position"])
        step = epoch * to_int(total) + pos if total is not None else pos
        exprs.append(step.alias("step"))
    total = next((f for f in t.fields if f.role == "total"), None)
    step_f = t.step_field()
    if total is not None and step_f is not None and total.index == step_f.index + 1:
        exprs.append(to_int(nums.list.get(total.index, null_on_oob=True)).alias("_total"))
    return sub.select(exprs)


def _typed(out: pl.DataFrame) -> pl.DataFrame:
    if "step" not in out.columns:
        out = out.with_columns(pl.lit(None, pl.Int64).alias("step"))
    stamps = out.get_column("stamp")
    time = stamp_times(stamps) if stamps.null_count() < len(stamps) else None
    out = out.drop("stamp")
    if time is not None:
        out = out.with_columns(time)
    else:
        out = out.with_columns(pl.lit(None, pl.Datetime("us", "UTC")).alias("time"))
    return out


def _multiline(
    df: pl.DataFrame, temps: dict[str, Template]
) -> tuple[pl.DataFrame | None, set[int]]:
    """Records spread over lines: a step alone (``[step=1/739328]``), then one
    ``key=value`` a line (OLMo). Returns the records and their continuation lines."""
    if not (df.get_column("kind") == "header").any():
        return None, set()
    body = df.filter(pl.col("s") != "").select("line", "kind", "body", "shape", "stamp")
    body = body.with_columns((pl.col("kind") != "pair").fill_null(True).cum_sum().alias("block"))
    heads = body.filter(pl.col("kind") == "header")
    pairs = body.filter(pl.col("kind") == "pair").join(
        heads.select("block"), on="block", how="semi"
    )
    if pairs.height == 0:
        return None, set()
    heads = heads.join(pairs.select("block").unique(), on="block", how="semi")
    fields = {s: t.fields[0] for s, t in temps.items() if t.kind == "pair"}
    names = pl.DataFrame(
        {
            "shape": list(fields),
            "col": [f.column for f in fields.values()],
            "scale": [f.scale for f in fields.values()],
        },
        schema={"shape": pl.String, "col": pl.String, "scale": pl.Float64},
    )
    first = to_float(pl.col("body").str.extract(f"({NUMBER})", 1)) * pl.col("scale")
    pairs = pairs.join(names, on="shape", how="left").with_columns(first.alias("v"))
    wide = pairs.pivot(on="col", index="block", values="v", aggregate_function="first")
    index = {s: t.step_field().index for s, t in temps.items() if t.kind == "header"}
    idx = pl.DataFrame(
        {"shape": list(index), "i": list(index.values())},
        schema={"shape": pl.String, "i": pl.Int64},
    )
    nums = pl.col("body").str.extract_all(NUMBER)
    step = to_int(nums.list.get(pl.col("i"), null_on_oob=True)).alias("step")
    steps = heads.join(idx, on="shape", how="left").select("block", "line", "stamp", step)
    out = steps.join(wide, on="block", how="inner").drop("block")
    return out.with_columns(pl.lit("<multiline>").alias("_shape")), set(
        pairs.get_column("line").to_list()
    )


def _dedupe(records: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Per-rank copies and redraws: consecutive records of one shape and one step, kept
    once (the last)."""
    if records.height < 2 or records.get_column("step").null_count() == records.height:
        return records.drop("_shape", strict=False), 0
    same = (pl.col("step") == pl.col("step").shift(1)) & (
        pl.col("_shape") == pl.col("_shape").shift(1)
    )
    # the last of the copies stays: a progress bar redrawn at one step ends in its final state
    same = same.shift(-1)
    keep = records.with_columns(same.fill_null(False).alias("_dup"))
    copies = int(keep.get_column("_dup").sum())
    out = keep.filter(~pl.col("_dup")).drop("_dup", "_shape")
    return out, copies


def _numbered(records: pl.DataFrame, df: pl.DataFrame, meta: dict) -> pl.DataFrame:
    """Records without a printed step: numbered in order, times ``logging_steps``."""
    stated = df.select(pl.col("s").str.extract(_LOGGING_STEPS, 1).drop_nulls().first()).item()
    every = int(stated) if stated is not None and len(stated) < 10 else 1
    meta.setdefault("caveats", []).append(
        "no step printed: records numbered in order"
        + (f" x logging_steps={every}" if stated is not None else " (1, 2, 3, ...)")
    )
    meta["steps_numbered"] = True
    n = records.height
    return records.with_columns(pl.Series("step", np.arange(1, n + 1) * every, pl.Int64))


def _events(
    df: pl.DataFrame,
    temps: dict[str, Template],
    records: pl.DataFrame,
    name: str,
    taken: set[int],
) -> tuple[list[EventBase], set[int]]:
    out: list[EventBase] = []
    lines: set[int] = set()
    rec_lines = records.get_column("line").to_numpy() if records.height else np.array([])
    rec_steps = records.get_column("step").to_numpy() if records.height else np.array([])
    val = df.filter(pl.col("kind") == "validation")
    for line, s, shape in val.select("line", "body", "shape").iter_rows():
        ev = _validation(s, temps[shape], line, name, rec_lines, rec_steps)
        if ev is not None:
            out.append(ev)
            lines.add(line)
    cand = df.filter(
        pl.col("s").str.contains(events.ANY) & ~pl.col("line").is_in(list(taken | lines))
    )
    for line, s in cand.select("line", "s").iter_rows():
        ev = events.read_event(s, line, name)
        if ev is None:
            continue
        if ev.step is None and len(rec_lines):
            i = int(np.searchsorted(rec_lines, line)) - 1
            if i >= 0 and ev.kind in ("checkpoint_save", "overflow_skip"):
                ev.step = int(rec_steps[i]) if not np.isnan(rec_steps[i]) else None
        out.append(ev)
        lines.add(line)
    out.sort(key=lambda e: e.source.line if e.source else 0)
    return out, lines


def _validation(s, t: Template, line, name, rec_lines, rec_steps) -> Validation | None:
    from parsers.reader.numbers import NUMBER_RE

    nums = NUMBER_RE.findall(s)
    values: dict[str, float | None] = {}
    step = None
    for f in t.fields:
        if f.index >= len(nums):
            continue
        try:
            v = float(nums[f.index].replace(",", "")) * f.scale
        except ValueError:
            continue
        if f.role == "step":
            step = int(v) if abs(v) < 9e18 and v == v else None
        elif f.column and f.role in ("value", "mean"):
            col = f.column
            for prefix in ("eval_", "val_", "valid_", "validation_", "test_"):
                col = col.removeprefix(prefix)
            values[col] = v
    if not values:
        return None
    if step is None and len(rec_lines):
        i = int(np.searchsorted(rec_lines, line)) - 1
        step = int(rec_steps[i]) if i >= 0 and rec_steps[i] == rec_steps[i] else None
    split = "val" if "val" in s.lower() else "eval" if "eval" in s.lower() else "test"
    return Validation(
        step=step, split=split, values=values, source=Source(file=name, line=line), text=s[:300]
    )


def _ignored(df: pl.DataFrame, spec: Spec) -> pl.Expr:
    s = pl.col("s")
    text = pl.col("text")
    mask = (s == "") | s.str.contains(COMMENT) | (pl.col("kind") == "summary")
    mask = mask | (text.str.contains(events.TRACEBACK_BODY) & pl.col("kind").is_null())
    if spec.noise:
        mask = mask | s.str.contains(spec.noise)
    return mask


def _columns_from(temps: dict[str, Template]) -> dict[str, str]:
    """Which printed key became which column, over the record templates."""
    out: dict[str, str] = {}
    for t in temps.values():
        if t.kind not in ("record", "pair"):
            continue
        for f in t.fields:
            if f.column and f.key and f.column not in out:
                out[f.column] = f.key
    return out
