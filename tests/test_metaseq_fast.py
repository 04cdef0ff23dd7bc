"""The fast paths of the metaseq parser, each against the plain way it replaces: the
layout reader (against JSON decoding), chunked decoding, the line-time reader, the
payload cut and the line classes."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from logbook.textio import split_lines
from parsers import json_decode as jd
from parsers import metaseq
from parsers.metaseq import lines as ml
from parsers.metaseq import records as mr
from parsers.metaseq.layout import OK, Layout
from parsers.metaseq.parts import in_parts

BASE = '{"epoch": 1, "loss": "2.5", "num_updates": "7"}'


def record(step: int, **over: object) -> str:
    obj: dict[str, object] = {"epoch": 1, "loss": f"{step % 7 + 0.5}", "num_updates": str(step)}
    obj.update(over)
    return json.dumps(obj)


# payloads the usual layout does not read: the JSON decoder reads the first ones...
ODD_JSON = [
    '{"loss": "2.5", "epoch": 1, "num_updates": "%d"}',  # another key order
    '{"epoch": 1, "loss": "2.5", "num_updates": "%d", "lr": "1e-4"}',  # a key more
    '{"epoch": 1, "num_updates": "%d"}',  # a key less
    '{"epoch": 1, "loss": "a\\", \\"b", "num_updates": "%d"}',  # an escaped quote
    '{"epoch": 1, "loss": 3.5, "num_updates": "%d"}',  # a bare number
    '{"epoch": 1, "loss": null, "num_updates": "%d"}',
    '{"epoch": 1, "loss": NaN, "num_updates": "%d"}',  # what Python writes
    '{"epoch": 1, "loss": {"a": "1"}, "num_updates": "%d"}',
    '{"epoch":1,"loss":"2.5","num_updates":"%d"}',  # compact separators
    '{"epoch": 1, "loss": "1", "loss": "2", "num_updates": "%d"}',  # a key twice
    '{"epoch": -0, "loss": "2.5", "num_updates": "%d"}',  # the decoder reads 0
]
# ... and rejects these: no JSON object
ODD_BAD = [
    '{"epoch": 1, "loss": "2.5", "num_updates": "%d"',  # cut short
    '{"epoch": +1, "loss": "2.5", "num_updates": "%d"}',
    '{"epoch": 1, "loss": "2"x", "num_updates": "%d"}',  # a bare quote
    '{"epoch": 1, "loss": "2", "num_updates": "%d"}, "x": "1"}',
    '{"epoch": 1, "loss": "2", "num_updates": "%d"}}',
]
ODD = ODD_JSON + ODD_BAD


def test_a_layout_is_learned_from_one_payload():
    layout = Layout.of(BASE)
    assert layout is not None and layout.keys == ["epoch", "loss", "num_updates"]
    assert [s.prefix for s in layout.slots] == ['{"epoch": ', 'loss": "', 'num_updates": "']
    assert [s.bare for s in layout.slots] == [True, False, False]
    assert layout.closing == '"}'
    last_bare = Layout.of('{"loss": "2.5", "wall": 3}')
    assert last_bare is not None and last_bare.closing == "}"
    assert [len(p) for p in last_bare.pieces] == [1, 1]


@pytest.mark.parametrize(
    "payload",
    [
        '{"a": {"b": "1"}}',
        '{"a": null}',
        '{"a": true}',
        '{"a": "1", "a": "2"}',
        '{"a": "x\\"y"}',
        '{"a":"1"}',
        '{"a": NaN}',
        "[1, 2]",
        "not json",
        "{}",
    ],
)
def test_no_layout_for_what_it_cannot_read(payload):
    assert Layout.of(payload) is None


def test_a_layout_reads_only_payloads_it_proves_exact():
    layout = Layout.of(BASE)
    rows = [
        '{"epoch": 2, "loss": "3.25", "num_updates": "8"}',
        '{"epoch": -0.0, "loss": "nan", "num_updates": "9"}',
        '{"epoch": 1, "loss": "n/a", "num_updates": "10"}',
        '{"epoch": 1, "loss": "", "num_updates": "1e3"}',
        '{"epoch": 1, "loss": "x, ", "num_updates": "11"}',  # ", " ends a value here
        '{"epoch": -12, "loss": "1", "num_updates": "12"}',  # bare: a plain integer
        '{"epoch": 1e3, "loss": "1", "num_updates": "13"}',  # ... other JSON numbers
        '{"epoch": 99999999999999999999, "loss": "1", "num_updates": "14"}',
        '{"epoch": 007, "loss": "1", "num_updates": "15"}',  # ... and no JSON number
        '{"epoch": 1, "loss": "2.5", "num_updates": "7"} ',
        '{"epoch": 1, "loss": "2\\u0030", "num_updates": "7"}',
        None,
    ] + [odd % 5 for odd in ODD]
    got = layout.read(pl.Series(rows, dtype=pl.String))
    assert got.get_column(OK).to_list() == [True] * 8 + [False] * (4 + len(ODD))
    read = got.head(8).drop(OK).rows()
    assert read[0] == (2.0, 3.25, 8.0)
    assert read[1][0] == 0.0 and math.copysign(1, read[1][0]) == -1 and math.isnan(read[1][1])
    assert read[2] == (1.0, None, 10.0)
    assert read[3] == (1.0, None, 1000.0)
    assert read[4] == (1.0, None, 11.0)
    assert read[5:] == [(-12.0, 1.0, 12.0), (1000.0, 1.0, 13.0), (1e20, 1.0, 14.0)]


def _as_rows(frame: pl.DataFrame, rows: np.ndarray) -> dict[int, str]:
    """Each decoded row as sorted JSON of its non-null numbers (NaN written as NaN)."""
    out = {}
    for i, row in zip(rows.tolist(), frame.iter_rows(named=True), strict=True):
        out[i] = json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True)
    return out


def _json_only(payload: pl.Series) -> tuple[dict[int, str], list[int]]:
    """What the plain JSON reading gives: numbers per row, and the rows it rejects."""
    frame, slow, bad = jd.decode(payload, strings=True)
    numbers = frame.drop(jd.ROW).select(pl.all().cast(pl.Float64, strict=False))
    out = _as_rows(numbers, frame.get_column(jd.ROW).to_numpy())
    for s in slow:
        cast = pl.DataFrame([s["obj"]]).cast(pl.String).cast(pl.Float64, strict=False)
        out |= _as_rows(cast, np.array([s[jd.ROW]]))
    return out, sorted(bad.tolist())


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 40 rows, two at a time, a second layout for 10 rows or more."""
    monkeypatch.setattr(mr, "CHUNK", 40)
    monkeypatch.setattr(mr, "GROUP", 80)
    monkeypatch.setattr(mr, "_MIN_CHUNK", 40)
    monkeypatch.setattr(mr, "_MIN_ROWS", 10)


def _decode_counting(payload: pl.Series, monkeypatch) -> tuple:
    sent: list[int] = []
    plain = jd.decode

    def counting(rows, *args, **kwargs):
        sent.append(rows.len())
        return plain(rows, *args, **kwargs)

    monkeypatch.setattr(jd, "decode", counting)
    frame, rows, bad = mr.decode(payload)
    monkeypatch.setattr(jd, "decode", plain)
    return frame, rows, bad, sum(sent)


def test_chunked_decoding_equals_json_decoding(small_chunks, monkeypatch):
    texts = [record(i) for i in range(300)]
    odd_at = list(range(3, 300, 19))[: len(ODD)]  # one odd payload every 19 rows
    for k, at in enumerate(odd_at):
        texts[at] = ODD[k] % at
    payload = pl.Series(texts)
    frame, rows, bad, to_json = _decode_counting(payload, monkeypatch)
    expected, rejected = _json_only(payload)
    assert bad.tolist() == rejected == odd_at[len(ODD_JSON) :]
    assert _as_rows(frame, rows) == expected
    assert rows.tolist() == sorted(expected)
    # "a" is nested in a value: an all-null column (to_metrics drops it)
    assert frame.columns == ["epoch", "loss", "num_updates", "lr", "a"]
    assert frame.get_column("a").null_count() == frame.height
    assert to_json == len(ODD)  # every other row was read by its layout


def test_a_new_layout_is_learned_where_the_keys_change(small_chunks, monkeypatch):
    texts = [record(i) for i in range(90)] + [record(i, lr="3e-4") for i in range(90, 200)]
    payload = pl.Series(texts)
    frame, rows, bad, to_json = _decode_counting(payload, monkeypatch)
    assert to_json == 0 and bad.size == 0 and rows.tolist() == list(range(200))
    assert frame.columns == ["epoch", "loss", "num_updates", "lr"]
    assert frame.get_column("lr").null_count() == 90
    assert frame.get_column("num_updates").to_list() == [float(i) for i in range(200)]


def test_alternating_layouts_and_trailing_blanks(small_chunks, monkeypatch):
    monkeypatch.setattr(mr, "_MIN_ROWS", 1)  # a layout for the last few rows too
    texts = [record(i, **({"lr": "1"} if i % 2 else {})) + " " * (i % 3 == 0) for i in range(120)]
    payload = pl.Series(texts)
    frame, rows, _, to_json = _decode_counting(payload, monkeypatch)
    expected, _ = _json_only(payload)
    assert _as_rows(frame, rows) == expected and to_json == 0


def test_a_key_first_seen_with_null_keeps_its_place():
    text = "".join(
        f"2022-11-11 16:04:{i:02d} | INFO | train_inner | {p}\n"
        for i, p in enumerate(
            ['{"epoch": 1, "loss": null, "num_updates": "1", "lr": "1"}']
            + [record(i, lr="1") for i in range(2, 6)]
        )
    )
    lines, _ = split_lines(text.encode())
    parsed = metaseq.parse(lines, "x.log")
    assert parsed.metrics.columns == ["line", "time", "epoch", "loss", "step", "lr"]
    assert parsed.metrics.get_column("loss").null_count() == 1


def test_line_times_in_every_stamp_form():
    text = pl.Series(
        [
            "2022-11-11 16:04:15 | INFO | x",
            "2022-11-11T16:04:15,250 | INFO | x",
            "rank 3: 2022-11-11 16:04:15.5 | INFO | x",
            "2022-13-11 16:04:15 | INFO | x",  # no such month
            "no time here",
            "\u0662\u0660\u0662\u0662-11-11 16:04:15 | INFO | x",  # Arabic-Indic digits
            "2022-11-11 16:04:15.125| INFO | x",  # a fraction where the space would be
            "2022-11-11 16:04:15",  # the stamp alone
        ]
    )
    got = ml.read_times(text)
    plain = text.to_frame("text").select(ml.timestamps(pl.col("text"))).to_series()
    assert got.to_list() == plain.to_list()
    assert [str(t) if t else None for t in got.to_list()] == [
        "2022-11-11 16:04:15+00:00",
        "2022-11-11 16:04:15.250000+00:00",
        "2022-11-11 16:04:15.500000+00:00",
        None,
        None,
        None,
        "2022-11-11 16:04:15.125000+00:00",
        "2022-11-11 16:04:15+00:00",
    ]


def test_payloads_behind_prefixes_of_any_length_and_alphabet():
    rows = [
        "2022-11-11 16:04:15 | INFO | train_inner | " + record(1),
        "slurm_procid 0 : 2022-11-11 16:04:16 | INFO | train_inner | " + record(2),
        "slurm_procid 12 : 2022-11-11 16:04:17 | INFO | train_inner | " + record(3),
        "n\u0153ud \u2192 2022-11-11 16:04:18 | INFO | train_inner | " + record(4),
        "2022-11-11 16:04:19 | INFO | train_inner | " + record(5, note="d\u00e9j\u00e0"),
    ]
    lines, _ = split_lines(("\n".join(rows) + "\n").encode())
    parsed = metaseq.parse(lines, "x.log")
    assert parsed.metrics.get_column("step").to_list() == [1, 2, 3, 4, 5]
    assert parsed.unrecognized.len() == 0
    assert str(parsed.metrics.get_column("time")[3]) == "2022-11-11 16:04:18+00:00"


def test_queries_on_slices_keep_the_row_order():
    frame = pl.DataFrame({"x": list(range(10))})
    got = in_parts(frame, lambda lf: lf.select(pl.col("x") * 2), part=2)
    assert got.get_column("x").to_list() == [2 * i for i in range(10)]
    assert in_parts(frame.clear(), lambda lf: lf.select("x")).height == 0


def test_line_classes():
    text = pl.Series(
        [
            "",
            "   ",
            "# collected from node 3",
            "2022-11-11 16:04:15 | INFO | metaseq.trainer | NOTE: gradient overflow detected",
            "2022-11-11 16:04:15 | INFO | metaseq.trainer | free: CUDA out of memory (ok)",
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "2022-11-11 16:04:15 | WARNING | py.warnings | UserWarning: deprecated",
            '  File "train.py", line 3, in main',
            "something else entirely",
        ]
    )
    e, n, u = ml.EVENT, ml.NOISE, ml.UNKNOWN
    assert ml.classify(text).tolist() == [ml.BLANK, ml.BLANK, ml.COMMENT, e, n, e, n, ml.CONT, u]


def test_keys_that_look_like_patterns_are_plain_names():
    # polars takes a column name ``^...$`` for a pattern: no column may be picked so
    text = "".join(
        f"2022-11-11 16:04:{i:02d} | INFO | train_inner | "
        + record(i, **{"^a.*$": "1.5", "t0": "2", "field_0": "3"})
        + "\n"
        for i in range(1, 4)
    )
    lines, _ = split_lines(text.encode())
    parsed = metaseq.parse(lines, "x.log")
    assert parsed.metrics.columns[-3:] == ["_a___", "t0", "field_0"]
    assert parsed.metrics.row(0, named=True) | {"time": None} == {
        "line": 1,
        "time": None,
        "epoch": 1,
        "loss": 1.5 * math.log(2),
        "step": 1,
        "_a___": 1.5,
        "t0": 2.0,
        "field_0": 3.0,
    }
