"""Records from the lines of record templates: one polars pass per template, records
spread over several lines (a step line, then ``key=value`` lines), per-rank copies and
progress-bar redraws, and records without a printed step."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import polars as pl

from parsers.reader import Spec, aliases, numbers
from parsers.reader.chunks import by_slices
from parsers.reader.clean import stamp_times
from parsers.reader.numbers import NUMBER, NUMBER_RE, to_float, to_int
from parsers.reader.templates import Template, epoch_only

# ``logging_steps=10``, ``logging_steps: 10``, ``"logging_steps": 10``, ``--logging_steps 10``
_LOGGING_STEPS = r"logging_steps[\"']?\s*[=:]?\s*(\d+)\b"


def template_records(
    df: pl.DataFrame,
    temps: dict[str, Template],
    spec: Spec,
    firsts: dict[str, str] | None = None,
) -> list[pl.DataFrame]:
    """The records of the record-template lines of ``df``, a frame per template
    (``firsts``: the body of each shape's first line in the file, when ``df`` is a
    part of it; else its first line in ``df``)."""
    # (``_seq``: the row's place, so that the records of one line, a redraw's states
    # glued on it, keep their order on the line whatever their templates)
    rows = df.with_row_index("_seq").filter(pl.col("kind") == "record")
    if not rows.height:
        return []
    ids = {shape: k for k, shape in enumerate(temps)}
    frames = []
    nums = pl.col("body").str.extract_all(NUMBER).alias("nums")
    parts = rows.partition_by("shape", as_dict=True, maintain_order=True)
    # the first epoch's number is the file's, from the first record that shows an
    # epoch: a shape first seen later (a bar with a message glued on) counts alike
    shown = (
        firsts if firsts is not None else {str(s[0]): sub["body"][0] for s, sub in parts.items()}
    )
    base_of = _file_base(shown, temps, spec)
    for shape, sub in parts.items():
        name = str(shape[0])
        t, k = temps[name], ids[name]
        base = base_of(t)
        # the values of a slice are read, typed, and let go before the next slice
        one = lambda part, t=t, k=k, b=base: _extract(part.with_columns(nums), t, spec, k, b)  # noqa: E731
        frames.append(by_slices(sub, one))
    return frames


def finished(
    frames: list[pl.DataFrame], df: pl.DataFrame, temps: dict[str, Template]
) -> tuple[pl.DataFrame, pl.Series]:
    """The template records (``frames``, emptied: their memory goes to the result)
    with the records spread over several lines of ``df``, in line order and typed; and
    the lines that hold the rest of those."""
    multi, continued = _multiline(df, temps)
    if multi is not None:
        frames.append(multi)
    if not frames:
        return _empty(), continued
    out = pl.concat(frames, how="diagonal_relaxed", rechunk=False)
    frames.clear()
    for name in out.columns:  # one column copied at a time, its pieces let go at once
        out.replace_column(out.get_column_index(name), out.get_column(name).rechunk())
    if "_seq" in out.columns:
        line, seq = out.get_column("line"), out.get_column("_seq")
        # (a sort copies every column: only where the records are out of order)
        back = (line.diff() == 0) & (seq.diff() < 0)
        if not line.is_sorted() or bool(back.any()):
            out = out.sort("line", "_seq", maintain_order=True, nulls_last=True)
        out = out.drop("_seq")
    elif not out.get_column("line").is_sorted():
        out = out.sort("line", maintain_order=True)
    out, merged = one_key_lines(_epoch_steps(typed(out)))
    if merged.len():
        continued = pl.concat([continued.cast(pl.Int64), merged]).sort()
    counted = _per_epoch(_counted_total(_bare_counter(_finer_counter(out))))
    return epoch_counter(counted, _stated_epoch_len(df)), continued


# columns of a record that are no metric of it
_NOT_VALUES = frozenset({"line", "stamp", "time", "step", "epoch", "source", "segment"})


def _epoch_steps(out: pl.DataFrame) -> pl.DataFrame:
    """``Epoch [613/1000], Train Loss: ...``: the epoch of its total is the step where the
    epochs of these lines grow from record to record (PaddleOCR logs many a line an
    epoch: those stay numbered)."""
    if "_epoch_step" not in out.columns:
        return out
    ok = out.get_column("_epoch_step").drop_nulls()
    if ok.len() > 1 and bool((ok.diff().drop_nulls() > 0).all()):
        out = out.with_columns(pl.coalesce("step", "_epoch_step").alias("step"))
    return out.drop("_epoch_step")


def one_key_lines(out: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Records printed one metric a line, each line with its step (TensorFlowTTS's
    ``(Step: 95400) train_f0_loss = 0.0659.``): the lines of one step in a row, each
    with another key, are one record (at its first line). Returns the records and
    the lines merged into the one before them."""
    none = pl.Series("line", [], pl.Int64)
    keys = [c for c in out.columns if c not in _NOT_VALUES and not c.startswith("_")]
    # (a number every line has, a logger's source line ``(base_trainer:831)``, is no
    # metric of one line)
    keys = [k for k in keys if out.get_column(k).null_count() > 0]
    if out.height < 2 or "step" not in out.columns or not keys:
        return out, none
    filled = out.select(pl.sum_horizontal(pl.col(k).is_not_null() for k in keys)).to_series()
    step = out.get_column("step")
    same = (step == step.shift(1)).fill_null(False)
    if float((filled == 1).mean() or 0) < 0.8 or float(same.mean() or 0) < 0.5:
        return out, none
    group = (~same).cum_sum().alias("_group")
    # (a key twice in one group is two records of the step: no merging)
    held = out.select(keys).with_columns(group)
    twice = held.group_by("_group").agg(
        pl.sum_horizontal(pl.col(k).is_not_null().sum() > 1 for k in keys).alias("_n")
    )
    if twice.get_column("_n").sum():
        return out, none
    lines = out.get_column("line")
    merged = (
        out.with_columns(group)
        .group_by("_group", maintain_order=True)
        .agg(pl.all().drop_nulls().first())
        .drop("_group")
    )
    kept = merged.get_column("line")
    return merged, lines.filter(~lines.is_in(kept.implode())).cast(pl.Int64)


# an epoch's summary that states how many steps it has (Time-Series-Library's
# ``Epoch: 18, Steps: 569 | Train Loss: ...``)
# (TRACE's ``Beginning of Epoch 1/18, Total Micro Batches 8`` too)
_EPOCH_STEPS = (
    r"(?i)\bepoch\b\W*\d+(?:/\d+)?\W+(?:total\s+)?(?:micro\s+)?"
    r"(?:steps|iters|iterations|batches)\W{0,3}(\d+)\b"
)


def _stated_epoch_len(df: pl.DataFrame) -> int | None:
    """The steps an epoch has, as the lines that are not records state it (the same on
    every such line), else None."""
    other = df.filter((pl.col("kind") != "record").fill_null(True))
    told = other.get_column("body").str.extract(_EPOCH_STEPS, 1).drop_nulls()
    if told.len() == 0:
        told = _espnet_epoch_len(other.get_column("body"))
    if told.len() == 0 or told.n_unique() != 1 or len(told[0]) > 9:
        return None
    n = int(told[0])
    return n if n > 0 else None


# ESPnet2's ``7epoch results: [train] ... total_count=52549``: the iterations so far
_RESULTS = r"\b(\d{1,6})epoch results: .*?\btotal_count=(\d{1,12})\b"


def _espnet_epoch_len(body: pl.Series) -> pl.Series:
    """The steps an epoch has, from ESPnet2's epoch results (the iterations so far over
    the epochs so far, where that divides)."""
    got = body.str.extract_groups(_RESULTS).struct.unnest().drop_nulls()
    if got.height == 0:
        return pl.Series([], dtype=pl.String)
    epochs, total = (got.get_column(c).cast(pl.Int64) for c in got.columns)
    whole = (epochs > 0) & (total % epochs.clip(1) == 0)
    return (total // epochs.clip(1)).filter(whole).cast(pl.String)


def _finer_counter(out: pl.DataFrame) -> pl.DataFrame:
    """Two step counters on every record (LitGPT's ``iter 15 step 0: loss ...``, with
    gradient accumulation): where the one taken as the step repeats from record to
    record while the other counts every record, the other is the step and the first
    is kept as ``optimizer_step`` (each micro-batch's loss is a record of its own)."""
    if "step" not in out.columns or out.height < 2 or "optimizer_step" in out.columns:
        return out
    step = out.get_column("step")
    if step.null_count() or not (step.diff().drop_nulls() == 0).any():
        return out
    for name in out.columns:
        if name == "step" or aliases.canonical(name) != aliases.STEP:
            continue
        alt = out.get_column(name)
        if alt.null_count() or not alt.dtype.is_numeric():
            continue
        finer = (alt.diff().drop_nulls() > 0).all() and (step.diff().drop_nulls() >= 0).all()
        if finer and (alt == alt.round()).all():
            counted = alt.cast(pl.Int64, strict=False)
            return out.with_columns(counted.alias("step"), step.alias("optimizer_step")).drop(name)
    return out


def _counted_total(out: pl.DataFrame) -> pl.DataFrame:
    """A "total" after the step that counts up from record to record while the step
    stays (WeNet's ``TRAIN Batch 4/203700``, ``Batch 4/203800``: epoch 4, batch 203700)
    is the counter, and the number before it the epoch: of the changes from one record
    to the next (per-rank copies repeat a record: no change), the second number moves
    in at least 3 in 4 and the first in at most 1 in 4, and where the first stays, the
    second goes up."""
    if not {"_total", "step"} <= set(out.columns) or out.height < 3 or "epoch" in out.columns:
        return out
    shapes = out.filter(pl.col("_total").is_not_null()).get_column("_shape").unique()
    if shapes.len() != 1:  # (one record shape prints the pair)
        return out
    pair = out.select("step", "_total").filter(pl.all_horizontal(pl.all().is_not_null()))
    moved = pair.filter(
        ((pl.col("step").diff() != 0) | (pl.col("_total").diff() != 0)).fill_null(True)
    )
    if moved.height < 2:
        return out
    d_step, d_total = moved.get_column("step").diff(), moved.get_column("_total").diff()
    n = moved.height - 1
    total_moves = int((d_total != 0).sum() or 0)
    step_moves = int((d_step != 0).sum() or 0)
    up = int(((d_step == 0) & (d_total > 0)).sum() or 0)
    stays = int((d_step == 0).sum() or 0)
    if total_moves < 0.75 * n or step_moves > 0.25 * n or up < 0.9 * stays:
        return out
    return out.with_columns(
        pl.col("step").cast(pl.Float64).alias("epoch"), pl.col("_total").alias("step")
    ).drop("_total")


def _per_epoch(out: pl.DataFrame) -> pl.DataFrame:
    """A step printed with its total that starts over with each epoch (``Epoch [2/5],
    Step [100/600]``) is counted over the epochs: (epoch - first) x total + step."""
    bases = out.get_column("_epoch_base").drop_nulls() if "_epoch_base" in out.columns else None
    out = out.drop("_epoch_base", strict=False)
    if not {"epoch", "_total", "step"} <= set(out.columns) or out.height < 2:
        return out
    epoch, step = pl.col("epoch"), pl.col("step")
    # (each epoch's one record at its last step, ``Epoch 35/300, Step 4/4``, starts no
    # step over: it repeats it)
    over = (epoch > epoch.shift(1)) & (step <= step.shift(1))
    within = (epoch == epoch.shift(1)) & (step < step.shift(1))
    flags = out.select(over.any().alias("o"), within.any().alias("w")).row(0)
    if not flags[0] or flags[1]:
        return out
    first = out.get_column("epoch").drop_nulls()
    base = first_epoch(first[0] if first.len() else None)
    if bases is not None and bases.len():
        base = int(bases[0])  # (the layout's own, where its first record tells: ``_base``)
    counted = ((epoch - base) * pl.col("_total") + step).cast(pl.Int64)
    # (the total was the epoch's, not the run's: no train_iters from it)
    return out.with_columns(pl.coalesce(counted, step).alias("step")).drop("_total")


def _bare_counter(out: pl.DataFrame) -> pl.DataFrame:
    """Two bare numbers leading a record (``333 154 Loss=nan Time=0.040``): where the
    first repeats from record to record while the second counts up within it (at four
    repeats in five at least: it goes back where another run starts), they are
    the epoch and the step in it (counted over the epochs by :func:`epoch_counter`);
    else the second is no column."""
    if "_counter" not in out.columns:
        return out
    step, counter = out.get_column("step"), out.get_column("_counter").cast(pl.Float64)
    ok = "epoch" not in out.columns and out.height > 2 and not step.null_count()
    ok = ok and not counter.null_count() and bool((counter == counter.round()).all())
    if ok:
        same = (step.diff() == 0).fill_null(False)
        grows = (counter.diff() > 0).fill_null(False)
        # (it may go back where another run or a relaunch starts: seldom)
        ok = bool(same.any()) and float((grows & same).sum()) >= 0.8 * float(same.sum())
    if not ok:
        return out.drop("_counter")
    return out.with_columns(
        step.cast(pl.Float64).alias("epoch"), counter.cast(pl.Int64).alias("step")
    ).drop("_counter")


def epoch_counter(out: pl.DataFrame, stated: int | None = None) -> pl.DataFrame:
    """A ``step`` that counts within each epoch, printed with no total (MindSpore's
    ``epoch: 27 step: 100, loss is 1.23``; in sink mode every epoch's one record is at
    its last step): counting from 1 (from 0 where the log states the length: TRACE's
    ``Epoch 1, Step 0``), where every new epoch (one more) starts the step
    over or repeats it and the step grows within an epoch, the steps are counted over
    the epochs with the length the log states (``stated``, when no step printed
    passes it), else the largest step printed, as the epoch's length: (epoch - first)
    x length + step, the first epoch 0 where one is numbered 0, else 1. The length is
    kept in ``_epoch_len`` for the caveat (negative when stated)."""
    if "_total" in out.columns or not {"epoch", "step"} <= set(out.columns) or out.height < 3:
        return out
    epoch, step = out.get_column("epoch"), out.get_column("step")
    if epoch.null_count() or step.null_count() or not epoch.dtype.is_numeric():
        return out
    e = epoch.cast(pl.Float64).to_numpy()
    st = step.cast(pl.Float64).to_numpy()
    if not np.isfinite(e).all() or (e != np.floor(e)).any() or st.min() < 0:
        return out
    zero = bool(st.min() == 0)  # (a step counted from 0: its epoch has one more)
    if zero and stated is None:
        return out  # (a counter from 0 says nothing of the epoch's length unless the
        # log states it: its last step printed may be any before it)
    de, ds = np.diff(e), np.diff(st)
    new = de > 0  # (an epoch going back starts another run pasted after: counted alike;
    # so does one that starts over where the file started: ``epoch 1 iter 150`` then
    # ``epoch 1 iter 10`` again, two trainings appended to one file)
    again = (de == 0) & (ds < 0) & (e[1:] == e[0]) & (st[1:] == st[0])
    within = (de == 0) & ~again
    if not new.any() or not ((de[new] == 1) & (ds[new] <= 0)).all() or (ds[within] <= 0).any():
        return out
    part = np.concatenate([[0], np.cumsum((de < 0) | again)])
    length = np.zeros(len(e), dtype=np.int64)
    base = np.zeros(len(e), dtype=np.int64)
    for k in np.unique(part):
        at = part == k
        length[at], base[at] = int(st[at].max()) + zero, 0 if e[at].min() == 0 else 1
    if (length < 1).any():
        return out
    told = stated is not None and bool((length <= stated).all())
    if zero and not told:
        return out
    if told:
        length[:] = stated
    counted = (e.astype(np.int64) - base) * length + st.astype(np.int64)
    return out.with_columns(
        pl.Series("step", counted, dtype=pl.Int64),
        pl.Series("_epoch_len", -length if told else length),
    )


def _empty() -> pl.DataFrame:
    return pl.DataFrame(
        schema={"line": pl.Int64, "step": pl.Int64, "time": pl.Datetime("us", "UTC")}
    )


def _extract(sub: pl.DataFrame, t: Template, spec: Spec, k: int, base: int) -> pl.DataFrame:
    """One template's rows as columns (``_shape``: the template's number ``k``; ``base``:
    the number of the first epoch)."""
    exprs: list[pl.Expr] = [pl.col("line"), pl.col("stamp"), pl.lit(k, pl.Int32).alias("_shape")]
    if "_seq" in sub.columns:
        exprs.append(pl.col("_seq"))
    nums = pl.col("nums")
    # thousands separators are rare: without any, the values are cast as they are
    commas = bool(sub.get_column("body").str.contains(r"\d,\d{3}").any())

    def to_float(v: pl.Expr) -> pl.Expr:
        return numbers.to_float(v, commas)

    def to_int(v: pl.Expr) -> pl.Expr:
        return numbers.to_int(v, commas)

    by_role = {}
    for f in t.fields:
        value = nums.list.get(f.index, null_on_oob=True)
        if f.cut:  # a number cut short reads as another number; a word reads whole
            value = pl.when(value.str.contains(r"(?i)^[-+]?(?:nan|inf)")).then(value)
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
        exprs.append(pl.lit(base, pl.Int64).alias("_epoch_base"))
        if epoch_only(t):  # (a whole epoch's number; a fraction is no step)
            # (an epoch of its total is the step only where each epoch has one record:
            # see :func:`typed`)
            of_total = any(f.role == "total" for f in t.fields)
            exprs.append(to_int(by_role["epoch"]).alias("_epoch_step" if of_total else "step"))
    if t.step_field() is None and "epoch" in by_role and "position" in by_role:
        pos_f = next(f for f in t.fields if f.role == "position")
        total_f = next(
            (f for f in t.fields if f.role == "total" and f.index == pos_f.index + 1), None
        )
        total = nums.list.get(total_f.index, null_on_oob=True) if total_f else None
        epoch = to_int(by_role["epoch"]) - base
        pos = to_int(by_role["position"])
        # counted over epochs where the framework does; else the counter may stand in
        # a fractional epoch (``epoch=11.9``: progress, not a counter) counts nothing:
        # the bar's position is the step then
        epoch_f = to_float(by_role["epoch"])
        fractional = epoch_f.is_not_null() & (epoch_f != epoch_f.floor())
        # (a dict glued after a bar is another logger's record: its bar says nothing)
        fractional = fractional & pl.lit(not t.dict_line)
        if spec.epoch_steps and total is not None:
            step = epoch * to_int(total) + pos
            exprs.append(pl.when(fractional).then(pos).otherwise(step).alias("step"))
        elif spec.counter_steps:
            exprs.append(pos.alias("step"))
    step_f = t.step_field()
    after = step_f.index + 1 if step_f is not None else -1
    total = next((f for f in t.fields if f.role == "total" and f.index == after), None)
    if total is not None:
        exprs.append(to_int(nums.list.get(total.index, null_on_oob=True)).alias("_total"))
    return sub.select(exprs)


def first_epoch(epoch: float | None) -> int:
    """The number a log gives its first epoch, from the epoch of its first record: 1
    where that is 1 (``Epoch [1/10]``), else 0 (a log counting from 0, or an excerpt)."""
    return 1 if epoch == 1 else 0


def _file_base(firsts: dict[str, str], temps: dict[str, Template], spec: Spec):
    """The first epoch's number of each template (see :func:`_base`): the
    framework's or the template's own where given, else that of the file's first
    record shape with an epoch (``firsts``: each shape's first body, in file order)."""
    with_epoch = [
        (body, temps[name])
        for name, body in firsts.items()
        if name in temps
        and temps[name].kind == "record"
        and not body.lstrip().startswith("# ")  # (a collector's comment is no record)
        and any(f.role == "epoch" for f in temps[name].fields)
    ]
    file_base = _base(*with_epoch[0], spec) if with_epoch else 0

    def base(t: Template) -> int:
        if spec.epoch_base is not None or t.epoch_base is not None:
            return _base("", t, spec)
        return file_base

    return base


def _base(first: str, t: Template, spec: Spec) -> int:
    """The number of a file's first epoch: the framework's, else 1 where its first
    record (``first``: its body) is of epoch 1 (``Epoch [1/10]``), else 0."""
    if spec.epoch_base is not None:
        return spec.epoch_base
    if t.epoch_base is not None:
        return t.epoch_base
    f = next((f for f in t.fields if f.role == "epoch"), None)
    if f is None:
        return 0
    nums = NUMBER_RE.findall(first)
    token = nums[f.index].replace(",", "") if f.index < len(nums) else ""
    value = float(token) if token.isdigit() else None  # ``001`` is 1 too
    # an epoch of its total after the word (``Epoch 35/300``, ``epoch: [12/20]``) counts
    # from 1, as ``Epoch E/N`` lines do (see :func:`in_epochs`); a bare ``[14/300]`` may
    # count from 0 (Swin's ``Train: [14/300][250/1251]``)
    if value is not None and value >= 1 and re.search(_EPOCH_OF_TOTAL, first):
        return 1
    return first_epoch(value)


def typed(out: pl.DataFrame) -> pl.DataFrame:
    """Records with a ``step`` column and their ``stamp`` read into ``time`` (kept where
    a part's stamps were read already)."""
    if "step" not in out.columns:
        out = out.with_columns(pl.lit(None, pl.Int64).alias("step"))
    if "stamp" not in out.columns:  # (parts typed already: ``time`` last, as it comes)
        return out.select(pl.exclude("time"), "time") if "time" in out.columns else out
    stamps = out.get_column("stamp")
    if stamps.null_count() < len(stamps):
        time = stamp_times(stamps)
    else:
        time = pl.repeat(None, len(stamps), dtype=pl.Datetime("us", "UTC"), eager=True)
    out = out.drop("stamp")
    if "time" in out.columns:
        time = out.select(pl.coalesce("time", time.alias("_t"))).to_series()
        out = out.drop("time")
    return out.with_columns(time.alias("time"))


def _multiline(
    df: pl.DataFrame, temps: dict[str, Template]
) -> tuple[pl.DataFrame | None, pl.Series]:
    """Records spread over lines: a step alone (``[step=1/739328]``), then one
    ``key=value`` a line (OLMo). Returns the records and their continuation lines."""
    none = pl.Series("line", [], pl.Int64)
    if not (df.get_column("kind") == "header").any():
        return None, none
    # (a line of a file read in blocks whose body was let go is a record's: not empty)
    body = df.filter((pl.col("body") != "").fill_null(True))
    body = body.select("line", "kind", "body", "shape", "stamp")
    body = body.with_columns((pl.col("kind") != "pair").fill_null(True).cum_sum().alias("block"))
    heads = body.filter(pl.col("kind") == "header")
    pairs = body.filter(pl.col("kind") == "pair").join(
        heads.select("block"), on="block", how="semi"
    )
    if pairs.height == 0:
        return None, none
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
    pairs = (
        pairs.with_columns(pl.col("shape").cast(pl.String))
        .join(names, on="shape", how="left")
        .with_columns(first.alias("v"))
    )
    wide = pairs.pivot(on="col", index="block", values="v", aggregate_function="first")
    index = {s: t.step_field().index for s, t in temps.items() if t.kind == "header"}
    idx = pl.DataFrame(
        {"shape": list(index), "i": list(index.values())},
        schema={"shape": pl.String, "i": pl.Int64},
    )
    nums = pl.col("body").str.extract_all(NUMBER)
    step = to_int(nums.list.get(pl.col("i"), null_on_oob=True)).alias("step")
    steps = (
        heads.with_columns(pl.col("shape").cast(pl.String))
        .join(idx, on="shape", how="left")
        .select("block", "line", "stamp", step)
    )
    out = steps.join(wide, on="block", how="inner").drop("block")
    return out.with_columns(pl.lit(-1, pl.Int32).alias("_shape")), pairs.get_column("line")


def dedupe(records: pl.DataFrame, marks: pl.Series) -> tuple[pl.DataFrame, int]:
    """Per-rank copies and redraws: consecutive records of one shape, one step and one
    epoch, with no launch or crash line (``marks``) between them and no other loss scale
    (a step retried after an overflow), kept once (the last)."""
    if records.height < 2 or records.get_column("step").null_count() == records.height:
        return records.drop("_shape", strict=False), 0
    at = np.searchsorted(np.sort(marks.to_numpy()), records.get_column("line").to_numpy())
    records = records.with_columns(pl.Series("_mark", at, pl.Int64))
    same = (
        (pl.col("step") == pl.col("step").shift(1))
        & (pl.col("_shape") == pl.col("_shape").shift(1))
        & (pl.col("_mark") == pl.col("_mark").shift(1))
    )
    if "epoch" in records.columns:  # a redraw is of one epoch (MindSpore's sink mode
        # prints ``epoch: 27 step: 100`` for every epoch)
        same = same & pl.col("epoch").eq_missing(pl.col("epoch").shift(1))
    if "loss_scale" in records.columns:  # a step retried after an fp16 overflow, at
        # another loss scale, is no copy
        scale = pl.col("loss_scale").cast(pl.Float64)
        same = same & ~(scale != scale.shift(1)).fill_null(False)
    # the last of the copies stays: a progress bar redrawn at one step ends in its final state
    same = same.shift(-1)
    dup = records.select(same.fill_null(False)).to_series()
    copies = int(dup.sum())
    out = records.filter(~dup) if copies else records  # (a filter copies every column)
    return out.drop("_shape", "_mark"), copies


def logging_steps(df: pl.DataFrame) -> str | None:
    """The ``logging_steps`` the first line that states it gives (digits), else None."""
    body = df.get_column("body")
    if not body.str.contains("logging_steps", literal=True).any():
        return None
    return df.select(pl.col("body").str.extract(_LOGGING_STEPS, 1).drop_nulls().first()).item()


def numbered(
    records: pl.DataFrame,
    stated: str | None,
    meta: dict,
    resumes: Sequence[tuple[int, int]] = (),
) -> tuple[pl.DataFrame, int]:
    """Records without a printed step: numbered in order, times ``logging_steps`` (as
    ``stated``: see :func:`logging_steps`); a record that a second logger prints again
    (the same epoch, the same loss to its rounding, right after) is one record (the
    fuller print kept). The records after a resume that states its step (``resumes``:
    (line, step) of each: ``Continuing training from global step 50``) go on from that
    step. Returns the records and how many prints were such twins."""
    records, twins = _twins(records)
    every = int(stated) if stated is not None and len(stated) < 10 else 1
    meta.setdefault("caveats", []).append(
        "no step printed: records numbered in order"
        + (f" x logging_steps={every}" if stated is not None else " (1, 2, 3, ...)")
    )
    meta["steps_numbered"] = True
    # the epoch going back (0.01 -> 0.0) starts another run pasted after the first: its
    # records are numbered from 1 again (and read as a run of their own)
    starts = np.zeros(records.height, dtype=bool)
    if "epoch" in records.columns and records.height > 1:
        epoch = records.get_column("epoch").cast(pl.Float64).fill_nan(None).forward_fill()
        starts[1:] = (epoch.diff() < 0).fill_null(False).to_numpy()[1:]
    first_number = np.ones(records.height, dtype=np.int64)
    rec_lines = records.get_column("line").to_numpy()
    for line, step in resumes:
        i = int(np.searchsorted(rec_lines, line, side="right"))
        if i < records.height:  # (the first log after it: the next multiple of the interval)
            starts[i], first_number[i] = True, step // every + 1
    run = np.cumsum(starts)
    first = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    number = np.arange(records.height) - first[run] + first_number[first[run]]
    return records.with_columns(pl.Series("step", number * every, pl.Int64)), twins


def _twins(records: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    if records.height < 2 or not {"epoch", "loss"} <= set(records.columns):
        return records, 0
    loss, epoch = pl.col("loss"), pl.col("epoch")
    close = (loss - loss.shift(-1)).abs() <= 1e-4 + 1e-3 * loss.abs()
    close = close & loss.is_finite() & loss.shift(-1).is_finite()  # (NaN <= NaN holds)
    same = (epoch == epoch.shift(-1)) | (epoch.is_not_null() & epoch.shift(-1).is_null())
    twin = same & (close | (loss.is_nan() & loss.shift(-1).is_nan()))  # (null: a cut twin)
    if "lr" in records.columns:  # a second print shows the same learning rate (rounded)
        lr, nxt = pl.col("lr"), pl.col("lr").shift(-1)
        near = (lr - nxt).abs() <= 1e-3 * lr.abs() + 1e-12
        cut = epoch.shift(-1).is_null()  # (a print cut short: its numbers may be too)
        twin = twin & (near | lr.is_null() | nxt.is_null() | cut)
    # a pair's first print gives way to the second (the Trainer's own, after a callback's);
    # pairs do not chain: the second print of one is not the first of another (the
    # next log's callback line, alike when the loss and the rounded epoch do not move)
    flags = records.select(twin.fill_null(False)).to_series().to_numpy()
    # where every record is alike (a loss stuck at 0.0, a frozen LR, an epoch rounded to
    # 0.01), the prints are logs that did not move, not pairs of one log
    values = [c for c in ("loss", "lr", "epoch") if c in records.columns]
    if records.height > 2 and records.select(values).n_unique() == 1:
        flags[:] = False
    drop = np.zeros(flags.size, dtype=bool)
    for i in np.flatnonzero(flags):
        drop[i] = not (i > 0 and drop[i - 1])
    out = records.filter(pl.Series(drop).not_())
    return out, records.height - out.height


_OF_TOTAL = r"(?i)\bepoch\s*\[?\s*\d+\s*/\s*\d+"
_EPOCH_OF_TOTAL = r"(?i)\bepoch\s*:?\s*\[?\s*\d+\s*/\s*\d+"


def in_epochs(records: pl.DataFrame, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """Records that count steps within an epoch announced on a line of its own
    (Keras: ``Epoch 2/10``, then ``100/300 [===>...] - loss: ...``): their step is
    counted over the epochs, (epoch - first) x steps per epoch + step, the first epoch
    being 1 where the lines say ``Epoch E/N``, else 1 or 0 as the log numbers them.
    Returns the records and the epoch lines used."""
    none = pl.Series("line", [], pl.Int64)
    heads = df.filter(pl.col("kind") == "epoch")
    if heads.height == 0 or records.height == 0 or "_total" not in records.columns:
        return records, none
    if "epoch" in records.columns and records.get_column("epoch").is_not_null().any():
        return records, none
    nums = pl.col("body").str.extract(f"({NUMBER})", 1)
    heads = heads.select("line", to_int(nums).alias("_epoch")).sort("line")
    ctx = records.select("line").with_row_index("_i").sort("line")
    ctx = ctx.join_asof(heads, on="line", strategy="backward").sort("_i")
    epoch = ctx.get_column("_epoch")
    if epoch.null_count() == epoch.len():
        return records, none
    # ``Epoch E/N`` (Keras, and most that print the total) counts from 1: an excerpt
    # that starts at epoch 4 is in its fourth epoch
    of_total = df.filter(pl.col("kind") == "epoch").get_column("body").str.contains(_OF_TOTAL)
    # (one numbered 0 counts from 0 though: AllenNLP's ``Epoch 0/139``)
    base = 1 if of_total.all() and epoch.min() != 0 else first_epoch(epoch.min())
    per = records.get_column("_total")
    step = (epoch - base) * per + records.get_column("step")
    counted = step.is_not_null()
    out = records.with_columns(
        pl.when(pl.Series(counted)).then(step).otherwise(pl.col("step")).alias("step"),
        epoch.cast(pl.Float64).alias("epoch"),
    )
    return out, heads.get_column("line")
