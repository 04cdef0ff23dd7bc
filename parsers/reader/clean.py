"""What logs put around a record, taken off in vectorized passes.

Colour codes, quote marks of a paste (``> ``, an inline-code backtick), typographic
quotes, launcher and rank tags (``[rank0]:``, ``[default3]:``, ``0:``, ``host: ``), logger
headers (``2024-05-01 12:00:00,123 - root - INFO - ``, ``[04/01 12:00:00 d2.utils.events]:``,
``I0501 12:00:00.123456 1234 file.py:12]``, ``module.name:157 >> ``, ``(main.py 216): ``) and
logger tags of ``|``-separated fields (nanotron's ``[INFO|DP=0|PP=0|TP=0|host]:``,
transformers' ``[INFO|trainer.py:1815]``).
Progress-bar redraws are split apart before (:func:`redraws`). The first time stamp of
a line is kept in ``stamp`` for the ``time`` column.
"""

from __future__ import annotations

import polars as pl

ANSI = r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07"
QUOTE = r"^(?:\s*>)+ ?"
# a Markdown inline-code span a paste opened or closed on a log line (``\`[  1]  1440 ||``);
# a fence (three backticks) is a line of its own, ignored
TICK_OPEN = r"^(\s*)`([^`])"
TICK_CLOSE = r"([^`])`\s*$"
# launcher / rank tags, possibly several (``[rank0]:[titan] ``, ``host: [default1]: ``,
# TorchX's ``[trainer0|0]:``),
# and line numbers of a paste (``[1744] ``, the first one cut to ``1743] ``); not a
# number a tab follows: gradient boosting's round (XGBoost's ``[500]\teval-logloss:...``)
_TAGS = (
    r"\[(?:rank|default|RANK|Rank)?\s*\d+\](?:\s*:|[ ]|$)|\[\d+(?:,\d+)*\]<std(?:out|err)>:?"
    r"|\[[A-Za-z_][\w-]*\|\d+\]:"  # TorchX: ``[trainer0|0]:``
    r"|[\w.-]+:\s+\[default\d+\]:|^\d{1,7}\]\s"
)
# srun --label's ``0: ``; not a number before a value (WaveGlow's ``5038:<TAB>nan``,
# Darknet's ``174: 933.3, ...``: the iteration), where a label precedes a log line's
# words or its time stamp
_LABEL = r"\d{1,5}:(?:\s|$)"
RANK = rf"^\s*(?:(?:{_TAGS}|{_LABEL})\s*)+"
RANK_TAGS = rf"^\s*(?:(?:{_TAGS})\s*)+"
_VALUED = r"^\s*\d{1,5}:\s+[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)(?:[,\s]|$)"
# date-time stamps in the common spellings: ISO order, the ``%m/%d/%Y %H:%M:%S`` of
# Python loggers set up the Hugging Face way (nanotron, accelerate), and without a year
# (detectron2, nanotron since 2025)
STAMP = (
    r"(?:\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{2}/\d{2}/\d{4}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
    r"|\d{2}/\d{2} \d{2}:\d{2}:\d{2})"
)
# a logger's source location before its message (LLaMA-Factory's ``[INFO|<time>]
# llamafactory.train.callbacks:157 >> {...}``): not a key and its value
LOGGER_AT = r"(?:^|\s)[A-Za-z_][\w.]*:\d+\s*>>\s"
# the header of glog and absl logging (JAX trainers: MaxText, t5x, big_vision):
# ``I1203 10:15:40.123456 140245 max_logging.py:35] `` (a stamp without a year: no time)
# a Keras callback's message printed onto the end of a progress bar (no newline before
# it): ``... - loss: 0.0205Epoch 00000: val_loss improved from inf to 0.01735, ...``
KERAS_GLUED = r"([^\s])Epoch \d{5}: .*$"
GLOG = r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\d+\s+[\w.-]+:\d+\]\s?"
# Ray's prefix of a worker's line, ``(run_maxtext_train pid=78967, ip=10.130.0.11) ``, and
# its log deduplication's ``[repeated 2x across cluster]`` at the end
RAY = r"^\s*\([\w.<>-]+ pid=\d+(?:, ip=[\d.]+)?\)\s?"
RAY_REPEAT = r"\s*\[repeated \d+x across cluster\]\s*$"
# Python logging's default ``%(levelname)s:%(name)s:`` (``INFO:root:``, absl's
# ``INFO:absl:[100] loss=0.69``)
PYLOG = r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):[\w.<>-]+:"
# a Python logger's ``(%(filename)s %(lineno)d):`` (Swin Transformer and its forks)
SOURCE_AT = r"\([\w.-]+\.py[ :]\d+\):?\s"
# a logger's source location in brackets: ``[mmm/train:458:__main__]``, ``[ezpz/dist:869]``
# (a path or a module and a line number, with the function or not)
CALL_AT = (
    r"\[[A-Za-z_][\w-]*(?:[/.][\w-]+)+:\d+(?::[\w.<>-]+)?\]"
    r"|\[[A-Za-z_][\w./-]*:\d+:[\w.<>-]+\]"
)
# a logger's tag of ``|``-separated fields: a level or a ``KEY=value`` first, then
# ranks, a host, a source location or a stamp (nanotron's ``[INFO|DP=0|PP=0|TP=0|host]:``,
# ``[WARNING|DP=1|PP=0|TP=0]:``; transformers' ``[INFO|trainer.py:1815]``; LLaMA-Factory's
# ``[INFO|2024-12-08 01:11:13]``): what it holds are no metrics
_LEVEL = r"(?i:debug|info|warning|warn|error|critical|fatal|trace|notice)"
LOGGER_TAG = rf"(?:^|\s)\[(?:{_LEVEL}|[A-Za-z]\w*=[\w.-]*)(?:\|[^\[\]|]{{1,80}})+\]:?(?:\s|$)"
TENSOR_VALUE = r"([=:]\s*)tensor\(\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf))[^()]*\)"
# ESPnet2's ``3epoch:train:1-375batch:``, the mean over batches 1..375 of epoch 3: read
# as ``epoch 3, batch 375:`` (the batch counts within its epoch)
ESPNET_RANGE = r"\b(\d{1,9})epoch:train:(\d{1,12})-(\d{1,12})batch:\s*"
_TYPO = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "}


def cleaned(text: pl.Series) -> pl.DataFrame:
    """``s`` (the line without decoration) and ``stamp`` (its first time stamp). A pass
    runs only where some line of the file needs it (most logs need few)."""
    s = pl.col("s")
    frame = text.alias("s").to_frame()
    if text.str.contains("\x1b", literal=True).any():
        frame = frame.with_columns(s.str.replace_all(ANSI, ""))
    if text.str.contains("[\u2018\u2019\u201c\u201d\u00a0]").any():
        typo = s
        for a, b in _TYPO.items():
            typo = typo.str.replace_all(a, b, literal=True)
        frame = frame.with_columns(typo)
    if text.str.contains(r"^\s*>").any():
        frame = frame.with_columns(s.str.replace(QUOTE, ""))
    if text.str.contains("`", literal=True).any():
        frame = frame.with_columns(s.str.replace(TICK_OPEN, "$1$2").str.replace(TICK_CLOSE, "$1"))
    if text.str.contains(" pid=", literal=True).any():
        frame = frame.with_columns(s.str.replace(RAY, "").str.replace(RAY_REPEAT, ""))
    if frame.get_column("s").str.contains(RANK).any():
        valued = s.str.contains(_VALUED)
        frame = frame.with_columns(
            pl.when(valued).then(s.str.replace(RANK_TAGS, "")).otherwise(s.str.replace(RANK, ""))
        )
    if text.str.contains(r"\SEpoch \d{5}: ").any():
        frame = frame.with_columns(s.str.replace(KERAS_GLUED, "$1"))
    if text.str.contains(r"[IWEF]\d{4} ").any():
        frame = frame.with_columns(s.str.replace(GLOG, ""))
    if text.str.contains(">>", literal=True).any():
        frame = frame.with_columns(s.str.replace(LOGGER_AT, " "))
    # (tested on the line as cleaned so far: a ``>`` quote mark before the level)
    if (
        frame.get_column("s")
        .str.contains(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):")
        .any()
    ):
        frame = frame.with_columns(s.str.replace(PYLOG, ""))
    if text.str.contains(".py", literal=True).any():
        frame = frame.with_columns(s.str.replace(SOURCE_AT, " "))
    if text.str.contains(r":\d+[\]:]").any():
        frame = frame.with_columns(s.str.replace(CALL_AT, " "))
    if text.str.contains("tensor(", literal=True).any():
        # a value printed as a scalar tensor behind its key (``train_epoch_loss=tensor(
        # 21.3289, device='cuda:0')``): its number (a tensor alone on a line stays)
        frame = frame.with_columns(s.str.replace_all(TENSOR_VALUE, "$1$2"))
    if text.str.contains("epoch:train:", literal=True).any():
        frame = frame.with_columns(s.str.replace(ESPNET_RANGE, "epoch $1, batch $3: "))
    # (the stamp first: a tag may hold it)
    frame = frame.with_columns(s.str.extract(f"({STAMP})", 1).alias("stamp"))
    if text.str.contains("|", literal=True).any():
        frame = frame.with_columns(s.str.replace(LOGGER_TAG, " "))
    return frame.select(s.str.strip_chars(), "stamp")


_FORMATS = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y/%m/%d %H:%M:%S",
)
_MONTH_FIRST = ("%m/%d/%Y %H:%M:%S", "%m/%d/%YT%H:%M:%S")
_DAY_FIRST = ("%d/%m/%Y %H:%M:%S", "%d/%m/%YT%H:%M:%S")


def stamp_times(stamps: pl.Series) -> pl.Series:
    """Stamps -> UTC datetimes (null where a stamp does not read, or lacks a year); a
    stamp's own UTC offset is applied, a stamp without one is read as UTC. A
    ``DD/DD/YYYY`` date is month first (``%m/%d/%Y``, as Python loggers are commonly
    set up), unless one of the stamps has a first number above 12: then all are day
    first."""
    base = stamps.str.replace(r"[.,]\d+.*$", "").str.replace(r"(Z|[+-]\d{2}:?\d{2})$", "")
    out = pl.Series("time", [None] * len(stamps), dtype=pl.Datetime("us", "UTC"))
    frac = stamps.str.extract(r"[.,](\d+)", 1)
    lead = base.str.extract(r"^(\d{2})/\d{2}/\d{4}", 1).cast(pl.Int32, strict=False)
    day_first = bool((lead > 12).any())
    for fmt in _FORMATS + (_DAY_FIRST if day_first else _MONTH_FIRST):
        t = base.str.strptime(pl.Datetime("us"), fmt, strict=False)
        out = out.fill_null(t.dt.replace_time_zone("UTC"))
    micros = frac.str.slice(0, 6).str.pad_end(6, "0").cast(pl.Int64, strict=False).fill_null(0)
    offset = stamps.str.extract(r"([+-])(\d{2}):?(\d{2})$", 0)
    sign = pl.select(pl.when(offset.str.starts_with("-")).then(-1).otherwise(1)).to_series()
    hours = offset.str.slice(1, 2).cast(pl.Int64, strict=False).fill_null(0)
    mins = offset.str.slice(-2, 2).cast(pl.Int64, strict=False).fill_null(0)
    shift = (sign * (hours * 3600 + mins * 60) * 1_000_000).cast(pl.Duration("us"))
    return (out + micros.cast(pl.Duration("us")) - shift).alias("time")


# where a progress bar starts again inside a line: a redraw whose carriage return was
# lost in a paste (``Epoch 0:  10%|█| 563/5000 [...]Epoch 0:  10%|█| 564/5000 [...]``)
_BAR_STARTS = (r"Epoch \d+: *:? *\d{1,3}%\|", r"\d{1,3}%\|")


def bar_counts(text: pl.Series) -> tuple[int, ...]:
    """For each way a progress bar starts, the most times it starts on one line."""
    return tuple(int(text.str.count_matches(start).max() or 0) for start in _BAR_STARTS)


def glued_start(counts: tuple[int, ...]) -> str | None:
    """The bar start that splits glued redraws: the first seen twice on one line."""
    return next((s for s, n in zip(_BAR_STARTS, counts, strict=True) if n >= 2), None)


def redraws(lines: pl.DataFrame, glued: str | None | bool = True) -> pl.DataFrame:
    """Lines with progress-bar redraws (carriage returns, or bars glued one after the
    other) as one row per drawn state, each with the physical line's number. ``glued``:
    the bar start to split glued redraws at (None: none), True to find it in these
    lines (a file read in blocks finds it over the whole file)."""
    text = lines.get_column("text")
    start = glued_start(bar_counts(text)) if glued is True else glued
    split = pl.col("text")
    if start is not None:
        split = split.str.replace_all(f"(\\S[ ,]*)({start})", "$1\r$2")
    if not (start is not None or text.str.contains("\r", literal=True).any()):
        return lines
    out = lines.with_columns(split.str.split("\r")).explode("text")
    first = pl.int_range(pl.len()).over("line") == 0
    return out.filter((pl.col("text").str.strip_chars() != "") | first)
