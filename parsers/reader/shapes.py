"""Lines -> shapes -> templates, and the adjustments that need every template of a file.

A line's shape is its cleaned text with every value made ``#`` and runs of white space
one space. Shapes are held as a categorical column (each distinct shape once); one
example line of each distinct shape is read into a template (:mod:`.templates`).
"""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl

from parsers.reader import Spec
from parsers.reader.chunks import by_slices
from parsers.reader.clean import STAMP, cleaned, redraws
from parsers.reader.numbers import NUMBER
from parsers.reader.templates import Template, epoch_only, template, train_loss, truncated

MAX_SHAPES = 20_000  # shapes read in Python, at most (the most frequent first)
DURATION = r"\b(?:\d+ days?, )?\d{1,3}:\d{2}(?::\d{2})?(?:\.\d+)?\b"
BAR = r"[\u2500-\u259f]+"  # the blocks and lines of a progress bar (tqdm's, rich's)
_EXAMPLE_MAX = 4000
_CUT_MAX = 2  # lines of one shape that may be records cut short (a paste's end, a kill)


def prepared(lines: pl.DataFrame, spec: Spec, glued: str | None | bool = True) -> pl.DataFrame:
    """``line``, ``indented`` (the raw line starts with white space), ``stamp``, ``body``
    (the cleaned line, stamps and durations as tokens) and ``shape`` (categorical); a
    line redrawn by a progress bar is one row per drawn state (``glued``: see
    :func:`~parsers.reader.clean.redraws`)."""
    rows = redraws(lines.select("line", "text"), glued)
    return by_slices(rows, lambda part: _prepared(part, spec))


def _prepared(lines: pl.DataFrame, spec: Spec) -> pl.DataFrame:
    text = lines.get_column("text")
    df = cleaned(text).with_columns(
        lines.get_column("line"), text.str.contains(r"^[ \t]").alias("indented")
    )
    s = pl.col("s")
    for pattern, repl in spec.rewrite:
        df = df.with_columns(s.str.replace_all(pattern, repl))
    if df.get_column("stamp").is_not_null().any():
        df = df.with_columns(s.str.replace_all(STAMP, " <time> "))
    if df.get_column("s").str.contains(r"\d:\d\d").any():
        df = df.with_columns(s.str.replace_all(DURATION, "<dur>"))
    if df.get_column("s").str.contains(BAR).any():
        df = df.with_columns(s.str.replace_all(BAR, ""))
    shape = s.str.replace_all(NUMBER, "#").str.replace_all(r"[ \t]{2,}|\t", " ").str.strip_chars()
    return df.with_columns(shape.cast(pl.Categorical).alias("shape")).rename({"s": "body"})


def templates_of(df: pl.DataFrame, spec: Spec) -> dict[str, Template]:
    """One template per shape that holds a value, adjusted over the whole file."""
    return templates_from(shape_counts(df), spec)


def shape_counts(df: pl.DataFrame) -> pl.DataFrame:
    """``shape`` (text), ``example`` (its first line's body) and ``n`` (its lines) of
    each shape that holds a value, in the order shapes first occur."""
    return (
        df.lazy()
        .group_by("shape", maintain_order=True)
        .agg(pl.col("body").first().alias("example"), pl.len().alias("n"))
        .with_columns(pl.col("shape").cast(pl.String))
        .filter(pl.col("shape").str.contains("#", literal=True))
        .collect()
    )


def merged_counts(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The :func:`shape_counts` of consecutive parts of a file as the file's."""
    return (
        pl.concat(parts)
        .group_by("shape", maintain_order=True)
        .agg(pl.col("example").first(), pl.col("n").sum())
    )


def templates_from(counts: pl.DataFrame, spec: Spec) -> dict[str, Template]:
    """One template per shape of ``counts`` (see :func:`shape_counts`), the most
    frequent first, adjusted over the whole file."""
    shapes = counts.sort(["n", "shape"], descending=[True, False]).head(MAX_SHAPES)
    out = {}
    for shape, example, n in shapes.iter_rows():
        out[shape] = template(shape, example[:_EXAMPLE_MAX], spec.aliases, spec.any_value)
        out[shape].count = n
    _side_records(out)
    _bare_pairs(out)
    _framework_records(out, spec)
    _epoch_summaries(out)
    _cut_records(out)
    _uncounted_records(out)
    return out


UNCOUNTED_MIN = 3  # lines of a shape without a step that make it the file's records
LONE_LOSS_MIN = 5  # lines of a loss alone that do


def _uncounted_records(temps: dict[str, Template]) -> None:
    """A file with no record shape at all, whose lines repeat a shape of a training
    loss and other named values with no step (``grad_norm: 205.2  loss: 20.49
    loss_cls: 8.63``, a paste cut before the counter; a loss alone on ``LONE_LOSS_MIN``
    lines or more): those lines are its records, numbered in order."""
    if any(t.kind == "record" for t in temps.values()):
        return
    for t in temps.values():
        named = [f for f in t.fields if f.key and f.column]
        # (a loss alone, ``Loss: 5.8984375`` line after line, takes more lines to tell)
        enough = len(named) >= 2 or (len(named) == 1 and t.count >= LONE_LOSS_MIN)
        if (
            t.kind is None
            and t.count >= UNCOUNTED_MIN
            and enough
            and train_loss(t)
            and not any(f.role in ("step", "position", "total") for f in t.fields)
        ):
            t.kind = "record"


def with_kinds(df: pl.DataFrame, temps: dict[str, Template]) -> pl.DataFrame:
    """``df`` with each line's ``kind`` (record, header, pair, validation, summary)."""
    kinds = {s: t.kind for s, t in temps.items() if t.kind is not None}
    kind = (
        pl.col("shape").cast(pl.String).replace_strict(kinds, default=None, return_dtype=pl.String)
    )
    # a comment (``# source: ...`` above a pasted excerpt) is no metric line, whatever
    # numbers it quotes
    comment = pl.col("body").str.contains(r"^#(?:\s|$)")
    return df.with_columns(pl.when(comment).then(None).otherwise(kind).alias("kind"))


def count_records(head: list[str], spec: Spec) -> int:
    """Records among the first lines (for sniffing)."""
    if not head:
        return 0
    frame = pl.DataFrame({"line": range(1, len(head) + 1), "text": head})
    df = prepared(frame, spec)
    temps = templates_of(df, spec)
    return with_kinds(df, temps).filter(pl.col("kind") == "record").height


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


BARE_MIN = 5  # lines of two bare numbers that make a file of them


def _bare_pairs(temps: dict[str, Template]) -> None:
    """Lines of two bare numbers (``1 -0.00138``: a step and its loss) are records only
    in a file whose records they all are, five or more (else they are digits of some
    other output: a model's samples, a table's cells)."""
    records = [t for t in temps.values() if t.kind == "record"]
    for t in records:
        if t.bare and (t.count < BARE_MIN or len(records) > 1):
            t.kind = None


def _framework_records(temps: dict[str, Template], spec: Spec) -> None:
    """A framework's own word on which record shapes are its records."""
    records = [(s, t) for s, t in temps.items() if t.kind == "record"]
    if spec.primary is not None and any(re.search(spec.primary, s) for s, _ in records):
        for s, t in records:
            if not re.search(spec.primary, s):
                t.kind = None
    if spec.secondary is not None:
        others = [t for s, t in records if not re.search(spec.secondary, s)]
        if others:
            for s, t in records:
                if re.search(spec.secondary, s):
                    t.kind = None


def _epoch_summaries(temps: dict[str, Template]) -> None:
    """A line of one epoch's losses with no other counter (``| epoch 010 | train loss
    1.44 | ...``) is a record only in a log of such lines; beside records that count
    steps, it sums its epoch up (a summary)."""
    records = [t for t in temps.values() if t.kind == "record"]
    if any(not epoch_only(t) for t in records):
        for t in records:
            if epoch_only(t):
                t.kind = "summary"


def _cut_records(temps: dict[str, Template]) -> None:
    """Lines cut inside a record (the end of a paste, a killed job) read with the
    template of the record they begin; a value the cut may have split is not read."""
    records = [t for t in temps.values() if t.kind == "record"]
    for shape, t in list(temps.items()):
        if t.kind == "validation" or (t.kind == "record" and t.count > _CUT_MAX):
            continue
        full = truncated(shape, records)
        if full is None or full.count < 2 * t.count:
            continue
        fields = [replace(f) for f in full.fields]
        n = shape.count("#")
        if shape.rstrip().endswith(("#", '#"')):
            for f in fields:
                if f.index == n - 1 and f.role != "step":
                    f.cut = True
        temps[shape] = Template(shape=shape, kind="record", fields=fields, count=t.count)


def _cols(t: Template) -> set[str]:
    return {f.column for f in t.fields if f.column}
