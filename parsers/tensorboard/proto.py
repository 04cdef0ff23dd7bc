"""TensorBoard ``Event`` records -> scalar points, vectorized over the records.

The messages read (field numbers from TensorFlow's ``event.proto``/``summary.proto``)::

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
              Summary summary = 5; ... }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; HistogramProto histo = 5;
              Image image = 4; Audio audio = 6; TensorProto tensor = 8;
              SummaryMetadata metadata = 9; }
    SummaryMetadata { PluginData plugin_data = 1; }  PluginData { string plugin_name = 1; }
    TensorProto { DataType dtype = 1; bytes tensor_content = 4; repeated float float_val = 5;
                  repeated double double_val = 6; repeated int32 int_val = 7;
                  repeated int64 int64_val = 10; repeated int32 half_val = 13; }

A scalar is a ``simple_value`` (TF1 writers, tensorboardX, PyTorch by default) or a
one-element numeric tensor whose tag's plugin is ``scalars`` or unnamed (TF2 writers,
PyTorch ``new_style``; a tag's plugin metadata may come with its first point only).
Records of one value each are decoded with numpy; the rest (several values in one
summary, fields out of the usual shape) by ``parsers.tensorboard.slow``, one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from parsers.tensorboard import slow
from parsers.tensorboard.strings import MAX_TAG, strings
from parsers.tensorboard.tensor import tensor_number
from parsers.tensorboard.wire import Field, fixed, varint, walk


@dataclass
class Points:
    """Scalar points of one file, in record order."""

    record: np.ndarray  # int64, 0-based record index in the file
    tag: np.ndarray  # int64, index into ``tags``
    step: np.ndarray  # int64
    wall: np.ndarray  # float64, unix seconds
    value: np.ndarray  # float64
    tags: list[str] = field(default_factory=list)


@dataclass
class Decoded:
    points: Points
    ignored: np.ndarray  # record indices that hold no scalar (headers, histograms, ...)
    bad: np.ndarray  # record indices that are not well-formed events
    kinds: dict[str, int] = field(default_factory=dict)  # what the ignored records held


def decode(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
    """Decode the ``Event`` messages at ``data[starts[i] : starts[i] + lengths[i]]``."""
    n = starts.size
    idx = np.arange(n, dtype=np.int64)
    simple = _simple(data, starts, lengths)
    rest = idx[~simple.ok]
    gen = _generic(data, starts[rest], lengths[rest])
    fast = idx[simple.ok]
    rows = _Rows(
        record=np.concatenate([fast, rest[gen.rows.record]]),
        tag_pos=np.concatenate([simple.tag_pos[fast], gen.rows.tag_pos]),
        tag_len=np.concatenate([simple.tag_len[fast], gen.rows.tag_len]),
        number=np.concatenate([simple.number[fast], gen.rows.number]),
        plugin=np.concatenate([np.full(fast.size, NO_META, np.int8), gen.rows.plugin]),
        kind=np.concatenate([np.ones(fast.size, np.int8), gen.rows.kind]),
        wall=np.concatenate([simple.wall[fast], gen.rows.wall]),
        step=np.concatenate([simple.step[fast], gen.rows.step]),
    )
    extra = gen.extra
    extra.record = rest[extra.record]
    points, dropped = _points(data, rows, extra)
    bad = rest[gen.bad]
    used = np.zeros(n, bool)
    used[points.record] = True
    isbad = np.zeros(n, bool)
    isbad[bad] = True
    kinds = dict(gen.kinds)
    if dropped:
        kinds["tensors"] = kinds.get("tensors", 0) + dropped
    return Decoded(points, idx[~used & ~isbad], idx[isbad], kinds)


@dataclass
class _Generic:
    rows: _Rows
    extra: slow.Slow
    bad: np.ndarray  # indices (into the records given) of malformed ones
    kinds: dict[str, int]


def _generic(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> _Generic:
    """Records of any other shape, read field by field (one value per summary), or one
    by one (several values, repeated fields)."""
    n = starts.size
    idx = np.arange(n, dtype=np.int64)
    ev, bad = walk(data, starts, starts + lengths, (1, 2, 5))
    odd = ~bad & ((ev[1].count > 1) | ~_wire_ok(ev[2], 0) | ~_wire_ok(ev[1], 1))
    odd |= ~bad & ((ev[5].count > 1) | (ev[5].count == 1) & (ev[5].wire != 2))
    s = np.flatnonzero(~bad & ~odd & (ev[5].count == 1))
    s0 = ev[5].pos[s]
    sm, sbad = walk(data, s0, s0 + ev[5].value[s].astype(np.int64), (1,))
    nval = sm[1].count
    one = ~sbad & sm[1].has(2)
    odd[s[~sbad & ~one & (nval > 0)]] = True
    bad[s[sbad]] = True
    v = s[one]
    v0 = sm[1].pos[one]
    vals = _values(data, v0, v0 + sm[1].value[one].astype(np.int64))
    bad[v[vals.bad]] = True
    odd[v[vals.odd]] = True
    ok = ~vals.bad & ~vals.odd
    rec = v[ok]
    wall = _f8(data, ev[1].pos, ev[1].count > 0)
    step = ev[2].value.view(np.int64)
    rows = _Rows(
        record=rec,
        tag_pos=vals.tag_pos[ok],
        tag_len=vals.tag_len[ok],
        number=vals.number[ok],
        plugin=vals.plugin[ok],
        kind=vals.kind[ok],
        wall=wall[rec],
        step=step[rec],
    )
    extra = slow.decode_many(data, starts[odd], lengths[odd], idx[odd])
    bad[idx[odd][extra.bad]] = True
    kinds = {"events without a summary (file version, graphs, logs)": int(
        (~bad & ~odd & (ev[5].count == 0)).sum()
    )}  # fmt: skip
    kinds["empty summaries"] = int((~sbad & (nval == 0)).sum())
    for k, c in list(vals.other.items()) + list(extra.other.items()):
        kinds[k] = kinds.get(k, 0) + c
    return _Generic(rows, extra, idx[bad], {k: c for k, c in kinds.items() if c})


@dataclass
class _Simple:
    """Records of the usual shape ``{wall_time, [step], summary {value {tag,
    simple_value}}}`` (every length under 128 bytes), read at fixed offsets."""

    ok: np.ndarray
    wall: np.ndarray
    step: np.ndarray
    tag_pos: np.ndarray
    tag_len: np.ndarray
    number: np.ndarray


def _simple(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> _Simple:
    n = starts.size
    end = starts + lengths
    last = data.size - 1

    def at(p: np.ndarray) -> np.ndarray:
        return data[np.minimum(p, last)].astype(np.int64)

    ok = (lengths >= 17) & (at(starts) == 0x09)
    p = starts + 9
    has_step = at(p) == 0x10
    step, slen = varint(data, np.where(has_step, p + 1, p))
    ok &= ~has_step | (slen > 0)
    p = np.where(has_step, p + 1 + slen, p)
    ok &= (at(p) == 0x2A) & (at(p + 1) < 0x80) & (p + 2 + at(p + 1) == end)
    p = p + 2
    ok &= (at(p) == 0x0A) & (at(p + 1) < 0x80) & (p + 2 + at(p + 1) == end)
    p = p + 2
    tag_len = at(p + 1)
    ok &= (at(p) == 0x0A) & (tag_len < 0x80)
    tag_pos = p + 2
    p = tag_pos + tag_len
    ok &= (at(p) == 0x15) & (p + 5 == end)
    idx = np.flatnonzero(ok)
    wall = np.full(n, np.nan)
    wall[idx] = fixed(data, starts[idx] + 1, "<f8")
    number = np.full(n, np.nan)
    number[idx] = fixed(data, p[idx] + 1, "<f4").astype(np.float64)
    step = np.where(has_step, step, np.uint64(0)).view(np.int64)
    return _Simple(ok, wall, step, tag_pos, tag_len, number)


def _wire_ok(f: Field, wire: int) -> np.ndarray:
    return (f.count == 0) | (f.wire == wire)


def _f8(data: np.ndarray, pos: np.ndarray, where: np.ndarray) -> np.ndarray:
    out = np.full(pos.size, np.nan)
    out[where] = fixed(data, pos[where], "<f8")
    return out


@dataclass
class _Values:
    """One summary value per message, read from its fields."""

    tag_pos: np.ndarray
    tag_len: np.ndarray
    number: np.ndarray  # float64 (NaN where none)
    kind: np.ndarray  # 0 no number, 1 simple_value, 2 tensor number
    plugin: np.ndarray  # NO_META / SCALAR_PLUGIN / OTHER_PLUGIN
    bad: np.ndarray
    odd: np.ndarray
    other: dict[str, int]  # non-scalar values by kind


def _values(data: np.ndarray, v0: np.ndarray, v1: np.ndarray) -> _Values:
    f, bad = walk(data, v0, v1, (1, 2, 3, 4, 5, 6, 8, 9))
    n = v0.size
    tag_ok = f[1].has(2) & (f[1].value.astype(np.int64) <= MAX_TAG)
    odd = ~bad & (~tag_ok | (f[2].count > 1) | (f[8].count > 1) | (f[9].count > 1))
    odd |= ~bad & (f[2].count == 1) & (f[2].wire != 5)
    number = np.full(n, np.nan)
    kind = np.zeros(n, np.int8)
    simple = ~bad & ~odd & f[2].has(5)
    number[simple] = fixed(data, f[2].pos[simple], "<f4").astype(np.float64)
    kind[simple] = 1
    tens = ~bad & ~odd & ~simple & f[8].has(2)
    t = np.flatnonzero(tens)
    t0 = f[8].pos[t]
    tnum, tok, tbad = tensor_number(data, t0, t0 + f[8].value[t].astype(np.int64))
    bad[t[tbad]] = True
    number[t[tok]] = tnum[tok]
    kind[t[tok]] = 2
    plugin = _plugins(data, f[9], ~bad & ~odd)
    other = {
        "histograms": int((~bad & (f[5].count > 0)).sum()),
        "images": int((~bad & (f[4].count > 0)).sum()),
        "audio": int((~bad & (f[6].count > 0)).sum()),
        "tensors": int((tens & ~bad).sum() - tok.sum()),
    }
    return _Values(
        tag_pos=f[1].pos,
        tag_len=f[1].value.astype(np.int64),
        number=number,
        kind=kind,
        plugin=plugin,
        bad=bad,
        odd=odd,
        other=other,
    )


NO_META, SCALAR_PLUGIN, OTHER_PLUGIN = -1, 0, 1


def _plugins(data: np.ndarray, meta: Field, where: np.ndarray) -> np.ndarray:
    """Per value: NO_META, SCALAR_PLUGIN (metadata naming ``scalars`` or no plugin) or
    OTHER_PLUGIN (histograms, text, hparams, ...)."""
    out = np.full(meta.count.size, NO_META, np.int8)
    m = np.flatnonzero(where & meta.has(2))
    if not m.size:
        return out
    out[m] = SCALAR_PLUGIN
    m0 = meta.pos[m]
    md, _ = walk(data, m0, m0 + meta.value[m].astype(np.int64), (1,))
    has_pd = md[1].has(2)
    p = m[has_pd]
    p0 = md[1].pos[has_pd]
    pd, _ = walk(data, p0, p0 + md[1].value[has_pd].astype(np.int64), (1,))
    named = pd[1].has(2)
    pos, ln = pd[1].pos[named], pd[1].value[named].astype(np.int64)
    names = strings(data, pos, ln)
    other = np.array([v not in ("", "scalars") for v in names.values], bool)
    out[p[named][other[names.ids]]] = OTHER_PLUGIN
    return out


def plugin_state(name: str | None) -> int:
    """The same three states for a plugin name read one by one."""
    if name is None:
        return NO_META
    return SCALAR_PLUGIN if name in ("", "scalars") else OTHER_PLUGIN


@dataclass
class _Rows:
    """Summary values read with numpy (parallel arrays)."""

    record: np.ndarray
    tag_pos: np.ndarray
    tag_len: np.ndarray
    number: np.ndarray
    plugin: np.ndarray  # NO_META / SCALAR_PLUGIN / OTHER_PLUGIN
    kind: np.ndarray  # 0 no number, 1 simple_value, 2 tensor number
    wall: np.ndarray
    step: np.ndarray


def _points(data: np.ndarray, rows: _Rows, extra: slow.Slow) -> tuple[Points, int]:
    """Join the numpy and one-by-one rows, give tags ids, keep the scalars; also the
    number of one-element tensors left out because their tag's plugin is not scalars."""
    names = strings(data, rows.tag_pos, rows.tag_len)
    # byte strings that decode to one name (invalid UTF-8 replaced) are one tag
    index: dict[str, int] = {}
    remap = np.array([index.setdefault(t, len(index)) for t in names.values], np.int64)
    slow_tag = np.array([index.setdefault(t, len(index)) for t in extra.tags], np.int64)
    tags = list(index)
    record = np.concatenate([rows.record, extra.record])
    tag = np.concatenate([remap[names.ids] if remap.size else names.ids, slow_tag])
    kind = np.concatenate([rows.kind, extra.kind])
    slow_plugin = np.array([plugin_state(p) for p in extra.plugin], np.int8)
    plugins = np.concatenate([rows.plugin, slow_plugin])
    named = np.flatnonzero(plugins != NO_META)
    named = named[np.argsort(record[named], kind="stable")]
    _, first = np.unique(tag[named], return_index=True)
    tag_state = np.full(len(tags), SCALAR_PLUGIN, np.int8)
    tag_state[tag[named][first]] = plugins[named][first]
    keep = (kind == 1) | ((kind == 2) & (tag_state[tag] == SCALAR_PLUGIN))
    dropped = int(((kind == 2) & ~keep).sum())
    order = np.flatnonzero(keep)
    order = order[np.argsort(record[order], kind="stable")]
    pts = Points(
        record=record[order],
        tag=tag[order],
        step=np.concatenate([rows.step, extra.step])[order],
        wall=np.concatenate([rows.wall, extra.wall])[order],
        value=np.concatenate([rows.number, extra.number])[order],
        tags=tags,
    )
    return pts, dropped
