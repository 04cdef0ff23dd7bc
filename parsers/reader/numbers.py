"""Numbers as training logs print them, found and typed in one vectorized pass.

A value token is a decimal number (``12``, ``-1.5``, ``.5``, ``1.2E+01``, ``193,831``
with thousands separators) or a non-finite word (``nan``, ``NaN``, ``NAN``, ``inf``,
``-inf``, ``Infinity``, also padded to a width: ``0000nan``, ``nanxxx``), starting at a
word boundary: the digit of ``layer3`` or ``mtp_1`` is part of a name, not a value.
What follows the number directly (``ms``, ``s``, ``%``, ``GiB``, ``k``, ``M``) is its
unit, read by :func:`unit_scale`.
"""

from __future__ import annotations

import re

import polars as pl

# One value: digits (with thousands commas or not), fraction, exponent; or nan/inf.
# The same pattern serves Python's ``re`` (templates) and polars' Rust regex (columns).
_DIGITS = r"(?:\b[0-9]{1,3}(?:,[0-9]{3})+\b|\b[0-9]+(?:\.[0-9]*)?|\B\.[0-9]+)"
_NONFINITE = r"(?:[Nn]a[Nn]|NAN|[Ii]nf(?:inity)?|INF)"
# (a fixed-width format pads a non-finite word as it pads digits: C's ``%07.5f`` prints
# ``0000nan``, Python's ``{:x<6f}`` (PaddleOCR) ``nanxxx``; first, or ``0000`` would be
# read as a zero)
_PADDED = rf"\b0*{_NONFINITE}x*\b"
NUMBER = rf"[-+]?(?:{_PADDED}|{_DIGITS}(?:[eE][-+]?[0-9]+)?)"
NUMBER_RE = re.compile(NUMBER)
# A number as the whole value (a quoted string value, a CSV cell).
WHOLE_NUMBER = re.compile(rf"^\s*{NUMBER}\s*$")

# Unit suffix -> factor to the canonical unit (seconds, bytes stay as printed in GiB...).
_TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "us": 1e-6, "µs": 1e-6, "min": 60.0, "h": 3600.0}
_COUNT_UNITS = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
UNIT_RE = re.compile(r"^(ms|us|µs|sec|min|s|h|%|[kKMBGT](?![a-zA-Z])|[KMGT]i?B|[a-zA-Z][a-zA-Z/]*)")


def unit_of(text_after: str) -> str:
    """The unit printed right after a number (``'ms'`` of ``'561.94ms,'``), or ``''``."""
    m = UNIT_RE.match(text_after)
    return m.group(1) if m else ""


def unit_scale(unit: str, is_time: bool) -> float:
    """The factor that brings a value in ``unit`` to the column's unit: seconds for
    times, plain counts for ``k``/``M`` suffixes; 1 for anything else (``%``, ``GiB``
    keep their own unit, named in the column)."""
    if is_time:
        return _TIME_UNITS.get(unit, 1.0)
    return _COUNT_UNITS.get(unit, 1.0)


def count_scale(unit: str) -> float | None:
    """The factor of a count suffix (``K``: 1000), or None for any other unit."""
    return _COUNT_UNITS.get(unit)


def to_float(col: pl.Expr, commas: bool = True) -> pl.Expr:
    """Number tokens (strings) -> Float64: thousands commas dropped (``commas``: the
    tokens may hold some), nan/inf read."""
    if commas:
        col = col.str.replace_all(",", "", literal=True)
    # a padded non-finite word (``0000nan``, ``nanxxx``) read without its padding
    bare = col.str.strip_chars_end("x").str.strip_chars_start("0")
    return pl.coalesce(col.cast(pl.Float64, strict=False), bare.cast(pl.Float64, strict=False))


def to_int(col: pl.Expr, commas: bool = True) -> pl.Expr:
    """Number tokens -> Int64 where they are whole numbers within int64; else null."""
    digits = col.str.replace_all(",", "", literal=True) if commas else col
    exact = digits.str.strip_chars_start("+").cast(pl.Int64, strict=False)  # digits as they are
    value = to_float(digits, commas=False)
    whole = value.is_finite() & (value == value.round(0)) & (value.abs() < 9.2e18)
    return pl.coalesce(exact, pl.when(whole).then(value).cast(pl.Int64, strict=False))
