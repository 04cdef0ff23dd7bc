"""Read flat JSON records that share one key layout without a JSON decoder.

metaseq and fairseq print each record with ``json.dumps`` of the same flat dict: the
same keys in the same order, every value a string but ``epoch`` (a number)::

    {"epoch": 1, "loss": "12.291", "ppl": "5010.1", "num_updates": "85", ...}

A :class:`Layout` is that key sequence, learned from one payload. A payload of the
same layout is cut at each ``", "`` (which in valid JSON only joins two string values:
a quote inside a string is escaped), each piece is checked to begin with its key, and
the text after the key is cast to a number. A payload is read this way only when the
checks prove it is exactly ``{"k1": v1, ...}`` with the layout's keys and separators:
no backslash anywhere, every piece begins with its key, the payload ends with the
closing of the last value, every bare value is a JSON number, and every string value
holds no quote (a value that reads as a number cannot). Anything else (another key
order, a key more or less, escapes, other spacing) is left to the JSON decoder.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import polars as pl

OK = "__layout_ok__"  # the per-row verdict column of Layout.read
_DOUBT = "__layout_doubt__"  # read, with a string value that is no number
PIECE = '", "'  # between a string value and the next key
PAIR = ', "'  # between a bare (number) value and the next key
# a JSON number, but for ``-0`` (which the JSON decoder reads as 0, not -0.0)
_FRAC, _EXP = r"\.[0-9]+", r"[eE][-+]?[0-9]+"
_JSON_NUMBER = (
    rf"^(?:-?[1-9][0-9]*(?:{_FRAC})?(?:{_EXP})?|0(?:{_FRAC})?(?:{_EXP})?"
    rf"|-0(?:{_FRAC}(?:{_EXP})?|{_EXP}))$"
)


@dataclass(frozen=True)
class Slot:
    """One key: the text before its value inside its piece, and whether the value is
    bare (a JSON number) rather than a string."""

    key: str
    prefix: str
    bare: bool


@dataclass(frozen=True)
class Layout:
    """The pieces of a payload cut at ``", "``; a piece holds bare-valued slots, then
    (except at the very end) one string-valued slot."""

    pieces: tuple[tuple[Slot, ...], ...]

    @property
    def keys(self) -> list[str]:
        return [s.key for piece in self.pieces for s in piece]

    @classmethod
    def of(cls, payload: str) -> Layout | None:
        """The layout of one payload, or None when it is not a flat object of strings
        and numbers printed with ``json.dumps``'s default separators."""
        pairs = _pairs(payload)
        if not pairs or "\\" in payload or len({k for k, _ in pairs}) < len(pairs):
            return None
        if {OK, _DOUBT} & {k for k, _ in pairs}:
            return None
        pieces: list[tuple[Slot, ...]] = []
        current: list[Slot] = []
        for k, v in pairs:
            bare = not isinstance(v, str)
            lead = '{"' if not pieces and not current else ""  # later keys follow a cut
            prefix = lead + k + '": ' + ("" if bare else '"')
            current.append(Slot(k, prefix, bare))
            if not bare:
                pieces.append(tuple(current))
                current = []
        if current:
            pieces.append(tuple(current))
        layout = cls(tuple(pieces))
        frame = layout.read(pl.Series([payload]))
        return layout if frame.get_column(OK).all() else None

    @property
    def closing(self) -> str:
        return "}" if self.pieces[-1][-1].bare else '"}'

    @property
    def slots(self) -> list[Slot]:
        return [s for piece in self.pieces for s in piece]

    def read(self, payload: pl.Series) -> pl.DataFrame:
        """One row per payload: ``OK`` (read by this layout), and a Float64 column per
        key (the value cast to a number; null where not a number)."""
        return self.settle(self.scan(payload).collect(), payload)

    def scan(self, payload: pl.Series) -> pl.LazyFrame:
        """:meth:`read` as a lazy query (so that several can run at once), but for the
        quote check: :meth:`settle` its result."""
        checks, numbers = [~pl.col("backslash")], []
        for i, (slot, end) in enumerate(zip(self.slots, self._closings(), strict=True)):
            ok, number, bare = _slot(slot, pl.col(f"t{i}"), end)
            checks += [ok] + ([bare] if bare is not None else [])
            numbers.append(number)
        # the numbers by position (a key such as ``^a.*$`` would be a pattern to pl.col)
        strings = [pl.nth(1 + i).is_null() for i, s in enumerate(self.slots) if not s.bare]
        doubt = pl.col(OK) & pl.any_horizontal(strings) if strings else pl.lit(False)
        return (
            self._texts(payload)
            .select(pl.all_horizontal(checks).fill_null(False).alias(OK), *numbers)
            .with_columns(doubt.alias(_DOUBT))
        )

    def settle(self, frame: pl.DataFrame, payload: pl.Series) -> pl.DataFrame:
        """Rows with a string value that is no number are read only if no such value
        holds a quote (a number cannot, so the check runs on those few rows alone)."""
        doubt = frame.get_column(_DOUBT)
        frame = frame.drop(_DOUBT)
        if not doubt.any():
            return frame
        quoted = [
            _value(s, pl.col(f"t{i}"), end).str.contains('"', literal=True).fill_null(False)
            for i, (s, end) in enumerate(zip(self.slots, self._closings(), strict=True))
            if not s.bare
        ]
        bad = self._texts(payload.filter(doubt)).select(pl.any_horizontal(quoted)).collect()
        rows = doubt.arg_true().filter(bad.to_series())
        return frame.with_columns(frame.get_column(OK).scatter(rows, False))

    def _closings(self) -> list[str]:
        """What ends each slot's text: nothing, but the closing of the payload."""
        return [""] * (len(self.slots) - 1) + [self.closing]

    def _texts(self, payload: pl.Series) -> pl.LazyFrame:
        """``backslash`` (whether the payload holds one) and ``t0``, ``t1``...: the
        text of each slot (null where the payload has too few pieces)."""
        texts: list[pl.Expr] = []
        subs: list[str] = []  # bare values and the string value after them, cut at ", "
        slots = 0
        for i, piece in enumerate(self.pieces):
            names = [f"t{slots + j}" for j in range(len(piece))]
            slots += len(piece)
            field = pl.col(f"field_{i}")
            if len(piece) == 1:
                texts.append(field.alias(names[0]))
                continue
            subs.append(f"s{i}")
            texts.append(
                field.str.splitn(PAIR, len(piece)).struct.rename_fields(names).alias(subs[-1])
            )
        return (
            pl.LazyFrame({"p": payload})
            .select(
                pl.col("p").str.contains("\\", literal=True).alias("backslash"),
                pl.col("p").str.splitn(PIECE, len(self.pieces)).alias("pieces"),
            )
            .unnest("pieces")
            .select("backslash", *texts)
            .unnest(*subs)
        )


def _value(slot: Slot, text: pl.Expr, closing: str) -> pl.Expr:
    value = text.str.slice(len(slot.prefix))
    return value.str.head(-len(closing)) if closing else value


def _slot(slot: Slot, text: pl.Expr, closing: str) -> tuple[pl.Expr, pl.Expr, pl.Expr | None]:
    """Whether the text of one slot begins (and ends) as it should, its value as a
    number, and for a bare value whether it is a JSON number."""
    ok = text.str.starts_with(slot.prefix)
    if closing:
        ok = ok & text.str.ends_with(closing)
    value = _value(slot, text, closing)
    bare = value.str.contains(_JSON_NUMBER) if slot.bare else None
    return ok, value.cast(pl.Float64, strict=False).alias(slot.key), bare


def _pairs(payload: str) -> list[tuple[str, Any]] | None:
    """The key/value pairs of a flat object whose values are strings or finite
    numbers, in order; None for anything else."""
    if not payload.startswith("{"):
        return None
    try:
        pairs = json.loads(payload, object_pairs_hook=list)
    except (ValueError, RecursionError):
        return None
    if not isinstance(pairs, list):
        return None
    for _, v in pairs:
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            return None
        if isinstance(v, float) and not math.isfinite(v):
            return None
    return pairs
