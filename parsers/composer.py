"""MosaicML Composer's console logger (llm-foundry, LLM-Shearing and other Composer
trainers): a record is a progress header, then one indented ``Train <name>: <value>``
line per metric::

    [batch=2/100]:
             Train time/batch: 1
             Train loss/train/total: 10.9724
             Train lr-DecoupledAdamW/group0: 0.0006

The header is ``[<unit>=N/M]:`` for a run whose length is counted in batches, tokens or
samples, or ``[epoch=E][batch=B/M]:`` (B counted within the epoch) for one counted in
epochs. The step is the batch: N for ``[batch=N/M]``, else ``time/batch`` + 1 (Composer
logs the metrics of a batch before it counts it), else the position in the epoch plus
the batches of the epochs before. ``[Eval batch=N/M] Eval on <label> data:`` blocks of
``Eval <name>: <value>`` lines are validation events at the last training step.

Composer's ``FileLogger`` (and trainers that print like it, LLM-Shearing) writes one
metric a line instead, ``[metric][batch=N]: <name>: <value> `` (N: the step passed to
``log_metrics``), beside ``[hyperparameter]: <name>: <value>`` lines (ignored). A
record is one ``log_metrics`` call: the metric lines of one N, a name's k-th line there
in the k-th record (one call logs each name once). The step is N, unless N does not
advance from record to record (a trainer that passes no step: ``batch=0`` throughout):
then the records are numbered 1, 2, ... in order, with a caveat.

Mapped: ``loss/train/total`` (else ``metrics/train/LanguageCrossEntropy``) -> ``loss``,
``lr-<optimizer>/group0`` -> ``lr``, ``l2_norm/grad/global`` -> ``grad_norm``,
``time/token`` -> ``tokens``, ``time/sample`` -> ``samples``,
``throughput/device/mfu`` -> ``mfu``, ``throughput/tokens_per_sec`` ->
``tokens_per_s``; other names in snake_case. Launcher prefixes (``0: `` of ``srun
--label``, ``[rank0]:``) and colour codes are taken off; the ``Config:`` dump between
lines of stars is ignored.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers.columns import with_core
from parsers.reader import aliases, events
from parsers.reader.clean import ANSI
from parsers.reader.extract import COMMENT, _step_before
from parsers.reader.numbers import to_float

NAME = "composer"
DESCRIPTION = "MosaicML Composer / llm-foundry console ([batch=N/M]: then 'Train key: value')"
EXAMPLE = "[batch=2/100]:\n\t Train loss/train/total: 10.9724"
MAPS = (
    "[batch=N/M]/time/batch+1->step, loss/train/total->loss, lr-*/group0->lr, "
    "l2_norm/grad/global->grad_norm, time/token->tokens, throughput/device/mfu->mfu; "
    "'Eval <key>' blocks->validation; others in snake_case"
)
SNIFF_MAX = 88

LAUNCHER = r"^(?:\d{1,5}: ?|\[(?:rank|default)\d+\]:\s?)"
HEADER = (
    r"^(?:\[epoch=(?P<epoch>\d{1,9})\])?\[(?P<unit>batch|token|sample|duration|ep)"
    r"=(?P<n>\d{1,18})(?:/(?P<total>[\d.]{1,20}))?\]:?\s*$"
)
EVAL_HEADER = (
    r"^\[Eval batch=(?P<n>\d{1,18})/(?P<total>\d{1,18})\] Eval on (?P<label>\S+) data:?\s*$"
)
PAIR = r"^(?P<who>Train|Eval) (?P<key>[^\s:][^:]*?): (?P<value>\S.*?)\s*$"
STARS = r"^\*{10,}\s*$"
FILE_METRIC = r"^\[metric\]\[batch=(?P<n>\d{1,18})\]: (?P<key>[^\s:][^:]*?): (?P<value>\S.*?)\s*$"
FILE_OTHER = r"^\[(?:hyperparameter|table)\]: "
# metric names -> canonical columns (normalized names: see ``aliases.norm``)
COLUMNS = {
    "loss_train_total": "loss",
    "l2_norm_grad_global": "grad_norm",
    "time_token": "tokens",
    "time_sample": "samples",
    "throughput_device_mfu": "mfu",
    "throughput_tokens_per_sec": "tokens_per_s",
    "throughput_device_tokens_per_sec": "device_tokens_per_s",
    "throughput_samples_per_sec": "samples_per_s",
    "throughput_batches_per_sec": "batches_per_s",
}
LOSS_FALLBACK = ("metrics_train_languagecrossentropy", "languagecrossentropy")
LR = re.compile(r"^lr_\w*?group0$")
_MARK = re.compile(
    r"^\s*(?:\d{1,5}: ?)?(?:\[epoch=\d+\])?\[(?:batch|token|sample)=\d+(?:/[\d.]+)?\]:\s*$"
)
_PAIR_MARK = re.compile(r"^\s*(?:\d{1,5}: ?)?\s+Train [^\s:][^:]*: \S")


def sniff(head: list[str]) -> int:
    """88 for a progress header followed by a ``Train <name>: <value>`` line, or for two
    ``[metric][batch=N]: <name>: <value>`` lines."""
    for a, b in zip(head, head[1:], strict=False):
        if _MARK.match(a) and _PAIR_MARK.match(b):
            return SNIFF_MAX
    metric = re.compile(LAUNCHER.removeprefix("^").join(["^(?:", ")?"]) + FILE_METRIC[1:])
    return SNIFF_MAX if sum(bool(metric.match(h.strip())) for h in head) >= 2 else 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    s = pl.col("text").str.replace_all(ANSI, "").str.replace(LAUNCHER, "").str.strip_chars()
    frame = lines.select("line", s.alias("s"))
    frame = frame.with_columns(
        pl.col("s").str.contains(HEADER).alias("head"),
        pl.col("s").str.contains(EVAL_HEADER).alias("eval_head"),
        pl.col("s").str.contains(PAIR).alias("pair"),
    ).with_columns(
        (pl.col("head") | pl.col("eval_head")).cum_sum().alias("block"),
        _config_dump(pl.col("s")).alias("config"),
    )
    heads = _headers(frame.filter("head"))
    pairs = _pairs(frame.filter("pair" & (pl.col("block") > 0)))
    caveats: list[str] = []
    file_logger = heads.height == 0 and frame.get_column("s").str.contains(FILE_METRIC).any()
    if file_logger:
        heads, pairs, caveats = _file_logger(frame)
        frame = frame.with_columns(pl.col("config") | pl.col("s").str.contains(FILE_OTHER))
    train = pairs.filter(pl.col("who") == "Train")
    records = _records(heads, train)
    evals = _evaluations(
        frame.filter("eval_head"), pairs.filter(pl.col("who") == "Eval"), records, name
    )
    used = set(heads.get_column("line").to_list()) | set(pairs.get_column("line").to_list())
    rest = frame.filter(~pl.col("line").is_in(list(used)) & ~pl.col("config"))
    maybe = rest.filter(pl.col("s").str.contains(events.ANY))
    found: list[EventBase] = []
    for line, text in maybe.select("line", "s").iter_rows():
        ev = events.read_event(text, line, name)
        if ev is not None:
            found.append(ev)
    ev_lines = {e.source.line for e in found if e.source}
    rest = rest.filter(~pl.col("line").is_in(list(ev_lines)))
    noise = (pl.col("s") == "") | pl.col("eval_head") | pl.col("s").str.contains(STARS)
    noise = noise | pl.col("s").str.starts_with("[trace]:") | pl.col("s").str.contains(COMMENT)
    unrec = rest.filter(~noise).get_column("line")
    ignored = rest.height - unrec.len() + int(frame.get_column("config").sum())
    meta: dict = {"caveats": caveats}
    if file_logger:  # a record's other metric lines
        meta["continued_lines"] = pairs.height - records.height
    return Parsed(
        metrics=with_core(records),
        events=[*evals, *sorted(found, key=lambda e: e.source.line if e.source else 0)],
        meta=meta,
        unrecognized=unrec,
        ignored=ignored,
    )


def _config_dump(s: pl.Expr) -> pl.Expr:
    """Lines of the ``Config:`` dump Composer prints between two lines of stars."""
    star = s.str.contains(STARS)
    inside = star.cast(pl.Int32).cum_sum() % 2 == 1
    return inside & ~star


def _headers(rows: pl.DataFrame) -> pl.DataFrame:
    g = rows.select("line", "block", pl.col("s").str.extract_groups(HEADER).alias("g")).unnest("g")
    return g.select(
        "line",
        "block",
        pl.col("unit"),
        pl.col("epoch").cast(pl.Int64, strict=False),
        pl.col("n").cast(pl.Int64, strict=False),
        pl.col("total").cast(pl.Float64, strict=False),
    )


def _pairs(rows: pl.DataFrame) -> pl.DataFrame:
    g = rows.select("line", "block", pl.col("s").str.extract_groups(PAIR).alias("g")).unnest("g")
    return _mapped(g)


def _mapped(g: pl.DataFrame) -> pl.DataFrame:
    """Pairs (``key``, ``value``) with their column (``col``) and number (``v``)."""
    names = g.get_column("key").unique().to_list()
    cols = {k: _column(k) for k in names}
    mapping = pl.DataFrame(
        {"key": list(cols), "col": list(cols.values())}, schema={"key": pl.String, "col": pl.String}
    )
    return g.join(mapping, on="key", how="left").with_columns(
        to_float(pl.col("value").str.strip_chars('"')).alias("v")
    )


def _file_logger(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Headers and pairs of ``[metric][batch=N]: <name>: <value>`` lines: a record per
    ``log_metrics`` call (a name's k-th line among the lines of one N: the k-th call),
    at the line of its first metric."""
    g = (
        frame.filter(pl.col("s").str.contains(FILE_METRIC))
        .select("line", pl.col("s").str.extract_groups(FILE_METRIC).alias("g"))
        .unnest("g")
        .with_columns(pl.col("n").cast(pl.Int64))
    )
    run = (pl.col("n") != pl.col("n").shift(1)).fill_null(True).cum_sum()
    g = g.with_columns(run.alias("_run"))
    g = g.with_columns(pl.col("line").cum_count().over("_run", "key").alias("_call"))
    g = g.with_columns(pl.struct("_run", "_call").rank("dense").cast(pl.Int64).alias("block"))
    heads = g.group_by("block", maintain_order=True).agg(pl.col("line").min(), pl.col("n").first())
    heads = heads.sort("line")
    caveats = []
    n = heads.get_column("n")
    if heads.height > 1 and not (n.diff().drop_nulls() > 0).all():
        caveats.append(
            f"the printed batch ({n[0]}, ...) does not advance from record to record: the "
            f"{heads.height} records are numbered 1.. in order"
        )
        n = pl.Series("n", range(1, heads.height + 1), dtype=pl.Int64)
    order = heads.get_column("block")
    heads = pl.DataFrame({"line": heads.get_column("line"), "block": order, "n": n}).with_columns(
        pl.lit("batch").alias("unit"),
        pl.lit(None, pl.Int64).alias("epoch"),
        pl.lit(None, pl.Float64).alias("total"),
    )
    pairs = _mapped(g.select("line", "block", pl.lit("Train").alias("who"), "key", "value"))
    return heads.select("line", "block", "unit", "epoch", "n", "total"), pairs, caveats


def _column(key: str) -> str:
    k = aliases.norm(key)
    if k in COLUMNS:
        return COLUMNS[k]
    if LR.match(k):
        return "lr"
    return aliases.column_of(key)


def _records(heads: pl.DataFrame, train: pl.DataFrame) -> pl.DataFrame:
    if heads.height == 0:
        return pl.DataFrame({"line": [], "step": []}, schema={"line": pl.Int64, "step": pl.Int64})
    wide = (
        train.filter(
            pl.col("v").is_not_null()
            | pl.col("value").str.to_lowercase().is_in(["nan", "inf", "-inf"])
        ).pivot(on="col", index="block", values="v", aggregate_function="first")
        if train.height
        else pl.DataFrame({"block": []}, schema={"block": pl.UInt32})
    )
    out = heads.join(wide, on="block", how="left", maintain_order="left")
    if "loss" not in out.columns:
        for alt in LOSS_FALLBACK:
            if alt in out.columns:
                out = out.rename({alt: "loss"})
                break
    batch = pl.col("time_batch") + 1 if "time_batch" in out.columns else pl.lit(None, pl.Float64)
    within = (pl.col("epoch") - 1) * pl.col("total") + pl.col("n")
    step = (
        pl.when((pl.col("unit") == "batch") & pl.col("epoch").is_null())
        .then(pl.col("n").cast(pl.Float64))
        .otherwise(pl.coalesce(batch, pl.when(pl.col("unit") == "batch").then(within)))
    )
    out = out.with_columns(step.round(0).cast(pl.Int64, strict=False).alias("step"))
    if "tokens" not in out.columns:
        out = out.with_columns(
            pl.when(pl.col("unit") == "token").then(pl.col("n").cast(pl.Float64)).alias("tokens")
        )
    out = out.drop("block", "unit", "n", "total").rename({"epoch": "epoch_field"})
    keep = [
        c for c in out.columns if c in ("line", "step") or out.get_column(c).is_not_null().any()
    ]
    return out.select(keep)


def _evaluations(
    heads: pl.DataFrame, pairs: pl.DataFrame, records: pl.DataFrame, name: str
) -> list[EventBase]:
    """One validation event per eval block with values, at the last training step."""
    if pairs.height == 0:
        return []
    rec_lines = records.get_column("line").to_numpy()
    rec_steps = records.get_column("step").cast(pl.Float64).to_numpy()
    label = heads.select(
        "block",
        pl.col("s").str.extract(EVAL_HEADER, 3).alias("label"),
        pl.col("line").alias("hline"),
    )
    out: list[EventBase] = []
    for _, part in pairs.join(label, on="block", how="left").group_by(
        ["block"], maintain_order=True
    ):
        values = {_eval_key(k): v for k, v in part.select("key", "v").iter_rows() if v is not None}
        loss = next((v for k, v in values.items() if k in EVAL_LOSS), None)
        if loss is not None:
            values["loss"] = loss
        hline = part.get_column("hline")[0]
        out.append(
            Validation(
                step=_step_before(hline, rec_lines, rec_steps),
                split=part.get_column("label")[0] or "eval",
                values=values,
                source=Source(file=name, line=int(hline)),
                text=f"Eval on {part.get_column('label')[0]} data",
            )
        )
    return out


EVAL_LOSS = ("languagecrossentropy", "loss", "cross_entropy")


def _eval_key(key: str) -> str:
    """``metrics/eval/LanguageCrossEntropy`` -> ``languagecrossentropy``; others in
    snake_case."""
    return aliases.column_of(key.split("/")[-1] if key.startswith("metrics/") else key)
