"""The value of a one-element numeric ``TensorProto``, read with numpy over many tensors.

``TensorProto { DataType dtype = 1; bytes tensor_content = 4; repeated float float_val =
5; repeated double double_val = 6; repeated int32 int_val = 7; repeated int64 int64_val
= 10; repeated int32 half_val = 13; }``: the value is in ``tensor_content`` (raw little
endian) or in the typed field, packed or not. Float, double, int32, int64, half and
bfloat16 tensors are read; others (strings, bools...) are no scalar.
"""

from __future__ import annotations

import numpy as np

from parsers.tensorboard.wire import Field, fixed, varint, walk

FLOAT, DOUBLE, INT32, INT64, BFLOAT16, HALF = 1, 2, 3, 9, 14, 19


def tensor_number(
    data: np.ndarray, t0: np.ndarray, t1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The value of one-element numeric tensors: (value, ok, malformed)."""
    f, bad = walk(data, t0, t1, (1, 4, 5, 6, 7, 10, 13))
    n = t0.size
    dtype = np.where(f[1].count > 0, f[1].value, 0).astype(np.int64)
    value = np.full(n, np.nan)
    ok = np.zeros(n, bool)
    content = f[4].has(2)
    clen = f[4].value.astype(np.int64)

    def take(where: np.ndarray, pos: np.ndarray, kind: str) -> None:
        w = where & ~bad & ~ok
        value[w] = _number_at(data, pos[w], kind)
        ok[w] = True

    take((dtype == FLOAT) & content & (clen == 4), f[4].pos, "<f4")
    take((dtype == FLOAT) & _single_fixed(f[5], 4), f[5].pos, "<f4")
    take((dtype == DOUBLE) & content & (clen == 8), f[4].pos, "<f8")
    take((dtype == DOUBLE) & _single_fixed(f[6], 8), f[6].pos, "<f8")
    take((dtype == INT32) & content & (clen == 4), f[4].pos, "<i4")
    take((dtype == INT64) & content & (clen == 8), f[4].pos, "<i8")
    take((dtype == HALF) & content & (clen == 2), f[4].pos, "<f2")
    take((dtype == BFLOAT16) & content & (clen == 2), f[4].pos, "bf16")
    for dt, fnum, kind in (
        (INT32, 7, "int"),
        (INT64, 10, "int"),
        (HALF, 13, "half"),
        (BFLOAT16, 13, "bf16bits"),
    ):
        w = (dtype == dt) & ~bad & ~ok
        val, good = _single_varint(data, f[fnum], w)
        value[good] = _from_varint(val[good], kind)
        ok |= good
    return value, ok, bad


def _single_fixed(f: Field, width: int) -> np.ndarray:
    """One packed element (a payload of ``width`` bytes) or one unpacked element."""
    packed = f.has(2) & (f.value.astype(np.int64) == width)
    return packed | f.has(5 if width == 4 else 1)


def _single_varint(data: np.ndarray, f: Field, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One varint element, unpacked (wire type 0) or packed alone in its payload."""
    good = where & f.has(0)
    val = f.value.copy()
    packed = np.flatnonzero(where & f.has(2))
    if packed.size:
        v, vlen = varint(data, f.pos[packed])
        alone = (vlen > 0) & (vlen == f.value[packed].astype(np.int64))
        val[packed[alone]] = v[alone]
        good[packed[alone]] = True
    return val, good


def _number_at(data: np.ndarray, pos: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        bits = fixed(data, pos, "<u2").astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).astype(np.float64)
    return fixed(data, pos, kind).astype(np.float64)


def _from_varint(val: np.ndarray, kind: str) -> np.ndarray:
    if kind == "int":
        return val.view(np.int64).astype(np.float64)
    bits = (val & np.uint64(0xFFFF)).astype(np.uint16)
    if kind == "half":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
