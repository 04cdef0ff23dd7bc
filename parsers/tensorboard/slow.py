"""TensorBoard ``Event`` records decoded one by one, for the few the vectorized reader
leaves: summaries with several values (TF1 merged summaries), repeated or unusual
fields. Same rules as ``parsers.tensorboard.proto``; a Python loop over these records only."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

_FLOAT, _DOUBLE, _INT32, _INT64, _BF16, _HALF = 1, 2, 3, 9, 14, 19


class Malformed(ValueError):
    """Bytes that are not a well-formed message."""


@dataclass
class Slow:
    """Scalar candidates from the records read one by one (parallel lists)."""

    record: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tags: list[str] = field(default_factory=list)
    number: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))  # 1 simple, 2 tensor
    plugin: list[str | None] = field(default_factory=list)
    wall: np.ndarray = field(default_factory=lambda: np.zeros(0))
    step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bad: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # per record given
    other: dict[str, int] = field(default_factory=dict)


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise Malformed("bad varint")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, object]]:
    """The (field number, wire type, value) triples of one message; a length-delimited
    value is its bytes, a fixed one its raw bytes, a varint its integer."""
    out: list[tuple[int, int, object]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            out.append((num, wire, val))
            continue
        width = {1: 8, 5: 4}.get(wire)
        if wire == 2:
            width, i = _varint(buf, i)
        if width is None or i + width > len(buf):
            raise Malformed("bad field")
        out.append((num, wire, buf[i : i + width]))
        i += width
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _plugin(meta: bytes) -> str:
    for num, wire, val in fields(meta):
        if num == 1 and wire == 2:
            for n2, w2, v2 in fields(val):  # type: ignore[arg-type]
                if n2 == 1 and w2 == 2:
                    return bytes(v2).decode("utf-8", "replace")  # type: ignore[arg-type]
    return ""


def _elements(fs: list[tuple[int, int, object]], num: int, width: int, fmt: str) -> list[float]:
    out: list[float] = []
    for n, w, v in fs:
        if n != num:
            continue
        raw = bytes(v) if w in (1, 2, 5) else b""  # type: ignore[arg-type]
        if w == 0:
            out.append(float(_signed(v)))  # type: ignore[arg-type]
        elif w == 2 and fmt == "varint":
            i = 0
            while i < len(raw):
                x, i = _varint(raw, i)
                out.append(float(_signed(x)))
        elif len(raw) % width == 0:
            out += [x[0] for x in struct.iter_unpack(fmt, raw)]
    return out


def tensor_number(buf: bytes) -> float | None:
    """The value of a one-element numeric tensor, else None."""
    fs = fields(buf)
    dtype = next((v for n, w, v in fs if n == 1 and w == 0), 0)
    content = b"".join(bytes(v) for n, w, v in fs if n == 4 and w == 2)  # type: ignore[arg-type]
    if content:
        fmt = {_FLOAT: "<f", _DOUBLE: "<d", _INT32: "<i", _INT64: "<q", _HALF: "<e"}.get(dtype)
        if dtype == _BF16 and len(content) == 2:
            return struct.unpack("<f", b"\x00\x00" + content)[0]
        if fmt and len(content) == struct.calcsize(fmt):
            return float(struct.unpack(fmt, content)[0])
        return None
    if dtype == _FLOAT:
        vals = _elements(fs, 5, 4, "<f")
    elif dtype == _DOUBLE:
        vals = _elements(fs, 6, 8, "<d")
    elif dtype in (_INT32, _INT64):
        vals = _elements(fs, 7 if dtype == _INT32 else 10, 0, "varint")
    elif dtype in (_HALF, _BF16):
        bits = _elements(fs, 13, 0, "varint")
        vals = [_half(int(b) & 0xFFFF, dtype) for b in bits]
    else:
        return None
    return vals[0] if len(vals) == 1 else None


def _half(bits: int, dtype: int) -> float:
    if dtype == _HALF:
        return float(np.array([bits], np.uint16).view(np.float16)[0])
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


_NON_SCALAR = {3: "histograms", 4: "images", 5: "histograms", 6: "audio"}


def decode_event(buf: bytes) -> tuple[float, int, list[tuple[str, int, float, str | None]], list]:
    """(wall time, step, [(tag, kind, number, plugin)], [non-scalar kinds]) of one Event."""
    wall, step, values, other = float("nan"), 0, [], []
    for num, wire, val in fields(buf):
        if num == 1 and wire == 1:
            wall = struct.unpack("<d", val)[0]  # type: ignore[arg-type]
        elif num == 2 and wire == 0:
            step = _signed(val)  # type: ignore[arg-type]
        elif num == 5 and wire == 2:
            for n, w, v in fields(val):  # type: ignore[arg-type]
                if n == 1 and w == 2:
                    values.append(v)
    out: list[tuple[str, int, float, str | None]] = []
    for raw in values:
        tag, number, kind, plugin = "", float("nan"), 0, None
        for num, wire, val in fields(raw):
            if num == 1 and wire == 2:
                tag = bytes(val).decode("utf-8", "replace")  # type: ignore[arg-type]
            elif num == 2 and wire == 5:
                number, kind = struct.unpack("<f", val)[0], 1  # type: ignore[arg-type]
            elif num == 8 and wire == 2 and kind == 0:
                t = tensor_number(bytes(val))  # type: ignore[arg-type]
                if t is None:
                    other.append("tensors")
                else:
                    number, kind = t, 2
            elif num == 9 and wire == 2:
                plugin = _plugin(bytes(val))  # type: ignore[arg-type]
            elif num in _NON_SCALAR:
                other.append(_NON_SCALAR[num])
        out.append((tag, kind, number, plugin))
    return wall, step, out, other


def decode_many(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, records: np.ndarray):
    """Decode these records one by one (``records``: their indices in the file)."""
    res = Slow(bad=np.zeros(starts.size, bool))
    rec, num, kind, wall, step = [], [], [], [], []
    view = memoryview(data)
    for j, (s, n, r) in enumerate(
        zip(starts.tolist(), lengths.tolist(), records.tolist(), strict=True)
    ):
        try:
            w, st, vals, other = decode_event(bytes(view[s : s + n]))
        except Malformed:
            res.bad[j] = True
            continue
        for k in other:
            res.other[k] = res.other.get(k, 0) + 1
        for tag, kd, x, plugin in vals:
            rec.append(r)
            res.tags.append(tag)
            num.append(x)
            kind.append(kd)
            res.plugin.append(plugin)
            wall.append(w)
            step.append(st)
    res.record = np.array(rec, np.int64)
    res.number = np.array(num, np.float64)
    res.kind = np.array(kind, np.int8)
    res.wall = np.array(wall, np.float64)
    res.step = np.array(step, np.int64)
    return res
