"""The reader's number tokens: which text is a value, its unit, and its typed column."""

from __future__ import annotations

import math

import polars as pl
import pytest

from parsers.reader.numbers import NUMBER_RE, WHOLE_NUMBER, to_float, to_int, unit_of, unit_scale


def tokens(text: str) -> list[str]:
    return NUMBER_RE.findall(text)


# ---- NUMBER_RE -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1.2E+01", ["1.2E+01"]),
        ("loss=1.5e-3", ["1.5e-3"]),
        ("lr 3.0e-04", ["3.0e-04"]),
        ("12", ["12"]),
        ("-1.5", ["-1.5"]),
        ("x:-2.5", ["-2.5"]),
        ("+3", ["+3"]),
        ("1.", ["1."]),
        (".5", [".5"]),
        ("lr .5e-4", [".5e-4"]),
        ("193,831", ["193,831"]),
        ("tokens 1,193,831 seen", ["1,193,831"]),
        ("123.45ms", ["123.45"]),
        ("0.5s", ["0.5"]),
        ("38.5%", ["38.5"]),
        ("11.66GiB", ["11.66"]),
    ],
)
def test_decimal_values(text, want):
    assert tokens(text) == want


def test_commas_that_are_not_thousands_separators_split_values():
    assert tokens("1,2") == ["1", "2"]
    assert tokens("12,3456") == ["12", "3456"]
    assert tokens("(0.9, 0.999)") == ["0.9", "0.999"]


@pytest.mark.parametrize("word", ["nan", "NaN", "NAN", "inf", "-inf", "+inf", "Inf", "INF"])
def test_non_finite_words(word):
    assert tokens(f"loss {word} |") == [word]


def test_infinity_spelled_out():
    assert tokens("loss Infinity") == ["Infinity"]
    assert tokens("loss -Infinity") == ["-Infinity"]


@pytest.mark.parametrize("text", ["inference", "nanny", "banana", "information", "Nancy"])
def test_non_finite_words_inside_other_words_are_not_values(text):
    assert tokens(text) == []


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("layer3", []),
        ("mtp_1", []),
        ("layer3 norm 1.5", ["1.5"]),
        ("mtp_1 loss 2.25", ["2.25"]),
        ("acc1: 76.5", ["76.5"]),
        ("top5 93.1", ["93.1"]),
        ("fp16 loss 2.0", ["2.0"]),
    ],
)
def test_digits_inside_names_are_not_values(text, want):
    assert tokens(text) == want


def test_a_line_of_several_values():
    line = "step 10 | loss 2.5 | lr 3e-4 | 412.5ms | mfu 38.5% | tokens 193,831"
    assert tokens(line) == ["10", "2.5", "3e-4", "412.5", "38.5", "193,831"]


def test_whole_number():
    for text in ["2.5", " 1e-4 ", "nan", "-inf", "193,831"]:
        assert WHOLE_NUMBER.match(text)
    for text in ["2.5x", "abc", "", "1 2"]:
        assert WHOLE_NUMBER.match(text) is None


# ---- units ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "unit"),
    [
        ("ms,", "ms"),
        ("ms | mfu", "ms"),
        ("s", "s"),
        ("sec", "sec"),
        ("min", "min"),
        ("h", "h"),
        ("us", "us"),
        ("µs", "µs"),
        ("%", "%"),
        ("%)", "%"),
        ("GiB", "GiB"),
        ("KiB", "KiB"),
        ("GB", "GB"),
        ("k ", "k"),
        ("K", "K"),
        ("M", "M"),
        ("B", "B"),
        ("tokens/s", "tokens/s"),
        ("it/s]", "it/s"),
        ("", ""),
        (" ms", ""),  # a unit is glued to its number
        (", loss", ""),
        ("/1000]", ""),
    ],
)
def test_unit_of(after, unit):
    assert unit_of(after) == unit


@pytest.mark.parametrize(
    ("unit", "is_time", "factor"),
    [
        ("ms", True, 1e-3),
        ("us", True, 1e-6),
        ("µs", True, 1e-6),
        ("s", True, 1.0),
        ("sec", True, 1.0),
        ("min", True, 60.0),
        ("h", True, 3600.0),
        ("", True, 1.0),
        ("%", True, 1.0),
        ("k", False, 1e3),
        ("K", False, 1e3),
        ("M", False, 1e6),
        ("B", False, 1e9),
        ("G", False, 1e9),
        ("T", False, 1e12),
        ("%", False, 1.0),
        ("GiB", False, 1.0),
        ("ms", False, 1.0),  # a time unit on a column that is not a time
        ("M", True, 1.0),  # a count suffix on a time column
        ("", False, 1.0),
    ],
)
def test_unit_scale(unit, is_time, factor):
    assert unit_scale(unit, is_time) == factor


# ---- typed columns -------------------------------------------------------------------

TOKENS = pl.Series(
    "v",
    ["1", "-3", "2.0", "1e3", "193,831", "1.5", "nan", "inf", "-inf", "x", None],
    pl.String,
)


def typed(fn, series: pl.Series) -> list:
    return pl.DataFrame({"v": series}).select(fn(pl.col("v"))).to_series().to_list()


def test_to_float():
    got = typed(to_float, TOKENS)
    assert got[:6] == [1.0, -3.0, 2.0, 1000.0, 193831.0, 1.5]
    assert math.isnan(got[6])
    assert got[7:] == [math.inf, -math.inf, None, None]


def test_to_float_of_non_finite_spellings():
    words = pl.Series("v", ["NaN", "NAN", "Inf", "-Infinity"])
    got = typed(to_float, words)
    assert math.isnan(got[0]) and math.isnan(got[1])
    assert got[2:] == [math.inf, -math.inf]


def test_to_int_keeps_whole_numbers_only():
    assert typed(to_int, TOKENS) == [1, -3, 2, 1000, 193831, None, None, None, None, None, None]
    assert pl.DataFrame({"v": TOKENS}).select(to_int(pl.col("v"))).dtypes == [pl.Int64]


def test_to_int_beyond_int64_is_null():
    big = pl.Series("v", ["9223372036854775808", "1e19", "-1e19", "1e300"])
    assert typed(to_int, big) == [None, None, None, None]


def test_to_int_keeps_every_digit_up_to_the_int64_maximum():
    exact = pl.Series("v", ["9007199254740993", "123456789012345678", "9223372036854775807"])
    assert typed(to_int, exact) == [9007199254740993, 123456789012345678, 2**63 - 1]


def test_to_int_of_large_values_within_int64():
    values = pl.Series("v", ["1,000,000,000", "1e15", "9000000000000000000"])
    assert typed(to_int, values) == [1_000_000_000, 10**15, 9 * 10**18]
