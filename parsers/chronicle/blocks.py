"""Split a chronicle's lines into blocks, on polars columns.

Each physical line gets a class: ``code`` (inside a ``` fence, fences included),
``log`` (raw log records pasted without a fence), ``collector`` (``# source:``,
``# note:`` and the ``# `` lines that continue a note, ``# ----``), ``blank``,
``markup`` (an image or HTML tag alone on its line), ``heading``, ``meta``
(``**Posted on:** ...``), ``entry`` (a line that opens with a date: a logbook entry) or
``text``. Blocks are: one per entry (with the lines under it, up to the next entry or
heading), one per paragraph or list item, one per fenced or pasted log block, one per
heading or meta line.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from parsers.chronicle.time import MONTHS

_FENCE = r"^\s*(?:```|~~~)[\w+.-]*\s*$"
_HEADING = r"^\s{0,3}#{1,6}\s+\S"
_COLLECTOR = r"^#\s+(?:source|note):|^#\s*-{3,}"
_DOC_KEYS = r"(?i:posted(?: on)?|written by|authors?|date|updated|last updated|published)"
_META = rf"^\s*\*\*{_DOC_KEYS}:\*\*|^\s*\*\*{_DOC_KEYS}\*\*:"
_MARKUP = r"^\s*(?:!\[[^\]]*\]\([^)]*\)|</?(?:p|img|br|div|center|hr)\b[^>]*>)\s*$"
_ENTRY = r"^\s*(?:[-*+]\s+)?(?:\*\*)?\d{4}-\d{1,2}-\d{1,2}(?:[\sT_:,]|\*\*|$)"
_LOG = (
    r"^\s*(?:\[[\w.-]+\]:\s*)?(?:\[?\d{4}-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}"
    r"|iteration\s+\d+\s*/\s*\d+|\{\s*\")"
)
# a timestamp to the second that a person wrote as an entry heading: zone, who, colon
_HUMAN = r"^\s*\d{4}-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}\s*(?:[A-Z]{1,4}\s*)?(?:\[[^\]]*\]\s*)?:\s"
_BULLET = r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S"
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))
# a date with its year, for placing later dates that have none
_FULL_DATE = (
    rf"\d{{4}}-\d{{1,2}}-\d{{1,2}}"
    rf"|(?i:\b(?:{_MONTH_ALT})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b)"
)


@dataclass
class Block:
    kind: str  # entry, text, code, log, heading, meta
    lines: list[int]
    texts: list[str]
    context: str | None  # the last full date written before (or on) the block's first line

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def line_at(self, offset: int) -> int:
        """The physical line holding character ``offset`` of :attr:`text`."""
        pos = 0
        for line, t in zip(self.lines, self.texts, strict=True):
            pos += len(t) + 1
            if offset < pos:
                return line
        return self.lines[-1]


def classify(lines: pl.DataFrame) -> pl.DataFrame:
    """Add ``cls``, ``bullet`` and ``context`` columns to a frame of ``line``, ``text``."""
    t = pl.col("text")
    fence = t.str.contains(_FENCE)
    df = lines.with_columns(fence.alias("_fence"), fence.cast(pl.Int64).cum_sum().alias("_fn"))
    in_code = (pl.col("_fn") % 2 == 1) | pl.col("_fence")
    hashed = t.str.starts_with("#") & ~in_code
    df = df.with_columns(
        in_code.alias("_code"),
        (hashed != hashed.shift(1, fill_value=False)).cum_sum().alias("_hrun"),
        (t.str.contains(r"^#\s+note:") & ~in_code).alias("_note"),
    )
    noted = pl.col("_note").cast(pl.Int8).cum_max().over("_hrun").cast(pl.Boolean)
    collector = ~pl.col("_code") & (t.str.contains(_COLLECTOR) | (t.str.starts_with("#") & noted))
    cls = (
        pl.when(pl.col("_code"))
        .then(pl.lit("code"))
        .when(collector)
        .then(pl.lit("collector"))
        .when(t.str.strip_chars() == "")
        .then(pl.lit("blank"))
        .when(t.str.contains(_LOG) & ~t.str.contains(_HUMAN))
        .then(pl.lit("log"))
        .when(t.str.contains(_MARKUP))
        .then(pl.lit("markup"))
        .when(t.str.contains(_HEADING))
        .then(pl.lit("heading"))
        .when(t.str.contains(_META))
        .then(pl.lit("meta"))
        .when(t.str.contains(_ENTRY))
        .then(pl.lit("entry"))
        .otherwise(pl.lit("text"))
    )
    return df.with_columns(
        cls.alias("cls"),
        t.str.contains(_BULLET).alias("bullet"),
        t.str.extract(f"({_FULL_DATE})", 1).forward_fill().alias("context"),
        ((pl.col("_fn") + 1) // 2).alias("_codeid"),
    )


def blocks(df: pl.DataFrame) -> list[Block]:
    """Group classified lines into blocks (blank, collector and markup lines belong to
    none)."""
    cls = pl.col("cls")
    prev = cls.shift(1, fill_value="blank")
    anchor = pl.when(cls.is_in(["entry", "heading"])).then(cls).forward_fill()
    starts = (
        cls.is_in(["entry", "heading", "meta"])
        | ((cls == "code") & ((prev != "code") | (pl.col("_codeid") != pl.col("_codeid").shift(1))))
        | ((cls == "log") & (prev != "log"))
        | ((cls == "text") & (pl.col("bullet") | (prev != "text")))
    )
    df = df.with_columns(anchor.alias("_anchor"), starts.cum_sum().alias("_b"))
    entry_b = pl.when(cls == "entry").then(pl.col("_b")).forward_fill()
    under_entry = (cls == "text") & (pl.col("_anchor") == "entry")
    df = df.with_columns(pl.when(under_entry).then(entry_b).otherwise(pl.col("_b")).alias("_block"))
    grouped = (
        df.filter(~cls.is_in(["blank", "collector", "markup"]))
        .group_by("_block", maintain_order=True)
        .agg(
            cls.first().alias("kind"),
            pl.col("line"),
            pl.col("text"),
            pl.col("context").first(),
        )
    )
    return [Block(kind, lines, texts, ctx) for _, kind, lines, texts, ctx in grouped.iter_rows()]
