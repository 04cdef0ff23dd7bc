"""TensorBoard reading speed: logbook's reader against tbparse and EventAccumulator.

Writes a TensorBoard directory with ``--points`` scalars per tag (default 1,000,000;
tags ``train/loss``, ``train/learning_rate``, ``train/grad_norm``; one event file, as
``SummaryWriter.add_scalar`` writes them: one ``simple_value`` per event), then times,
in the same process and on the same files:

- ``logbook``: ``parsers.tensorboard.read_path`` (all scalars, wide table);
- ``EventAccumulator`` with ``size_guidance={"scalars": 0}`` (keep every point);
- ``tbparse.SummaryReader`` (which keeps every point by default).

Each reader must return every point; the script checks the counts and that logbook's
values equal EventAccumulator's. The files are written with numpy (a few seconds); the
writer is checked against ``tensorboardX``'s on a small run before timing.

    python bench/tb_bench.py [--points N] [--dir DIR] [--skip-tbparse]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parsers.tensorboard import tfrecord as tfr  # noqa: E402

TAGS = ("train/loss", "train/learning_rate", "train/grad_norm")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _block(steps: np.ndarray, walls: np.ndarray, tag: str, values: np.ndarray) -> np.ndarray:
    """Framed Events {wall_time, step, summary {value {tag, simple_value}}} for steps
    whose varint has one width: an (n, record size) byte array."""
    n = steps.size
    tag_b = tag.encode()
    value_msg = b"\x0a" + bytes([len(tag_b)]) + tag_b + b"\x15"
    summary = b"\x0a" + bytes([len(value_msg) + 4]) + value_msg
    width = len(_varint(int(steps[0]))) if steps[0] else 0
    body_len = 9 + (1 + width if steps[0] else 0) + 2 + len(summary) + 4
    rec = np.zeros((n, 12 + body_len + 4), np.uint8)
    rec[:, 0:8] = np.frombuffer(np.uint64(body_len).tobytes(), np.uint8)
    rec[:, 8:12] = np.frombuffer(_u32(tfr.crc32c_bytes(np.uint64(body_len).tobytes())), np.uint8)
    rec[:, 12] = 0x09
    rec[:, 13:21] = np.ascontiguousarray(walls.astype("<f8")).view(np.uint8).reshape(n, 8)
    c = 21
    if steps[0]:
        rec[:, c] = 0x10
        v = steps.astype(np.uint64)
        for k in range(width):
            byte = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
            rec[:, c + 1 + k] = byte | (0x80 if k < width - 1 else 0)
        c += 1 + width
    head = b"\x2a" + bytes([len(summary) + 4]) + summary
    rec[:, c : c + len(head)] = np.frombuffer(head, np.uint8)
    c += len(head)
    rec[:, c : c + 4] = np.ascontiguousarray(values.astype("<f4")).view(np.uint8).reshape(n, 4)
    flat = rec.ravel()
    starts = np.arange(n) * rec.shape[1] + 12
    crc = tfr.mask(tfr.crc32c(flat, starts, np.full(n, body_len)))
    rec[:, -4:] = crc.view(np.uint8).reshape(n, 4)
    return rec


def _u32(crc: int) -> bytes:
    return tfr.mask(np.array([crc], np.uint32)).astype("<u4").tobytes()


def _frame(body: bytes) -> bytes:
    head = np.uint64(len(body)).tobytes()
    return head + _u32(tfr.crc32c_bytes(head)) + body + _u32(tfr.crc32c_bytes(body))


def write_run(directory: Path, points: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One event file; the tags interleave step by step, as a training loop logs them."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    steps = np.arange(points, dtype=np.int64)
    values = {
        "train/loss": (2.0 + rng.standard_normal(points) * 0.05).astype(np.float32),
        "train/learning_rate": np.full(points, 3e-4, np.float32),
        "train/grad_norm": np.abs(rng.standard_normal(points)).astype(np.float32),
    }
    # steps grouped by the width of their varint (0 is left out of the event: proto3)
    bounds = [0, 1, 1 << 7, 1 << 14, 1 << 21, 1 << 28, 1 << 35]
    blocks, keys = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        sel = steps[(steps >= lo) & (steps < hi)]
        if not sel.size:
            continue
        for k, tag in enumerate(TAGS):
            walls = 1.7e9 + sel * 0.5 + 0.01 * k
            blocks.append(_block(sel, walls, tag, values[tag][sel]))
            keys.append(sel * len(TAGS) + k)
    order_key = np.concatenate(keys)
    sizes = np.concatenate([np.full(b.shape[0], b.shape[1]) for b in blocks])
    order = np.argsort(order_key, kind="stable")
    dest = np.zeros(order.size, np.int64)
    dest[order] = np.concatenate([[0], np.cumsum(sizes[order])[:-1]])
    out = np.zeros(int(sizes.sum()), np.uint8)
    at = 0
    for b in blocks:
        d = dest[at : at + b.shape[0]]
        out[d[:, None] + np.arange(b.shape[1])] = b
        at += b.shape[0]
    version = b"\x09" + np.float64(1.7e9 - 1).tobytes() + b"\x1a\x0dbrain.Event:2"
    path = directory / "events.out.tfevents.1700000000.bench.1.0"
    with open(path, "wb") as fh:
        fh.write(_frame(version))
        fh.write(out.tobytes())
    return values


def check_writer(tmp: Path) -> None:
    """The numpy writer gives what tensorboardX's reader-visible output gives."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    d = tmp / "check"
    vals = write_run(d, 300)
    acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
    acc.Reload()
    for tag in TAGS:
        got = np.array([e.value for e in acc.Scalars(tag)], np.float32)
        assert np.array_equal(got, vals[tag]), tag


def time_logbook(d: Path) -> tuple[float, int, object]:
    from parsers import tensorboard

    t = time.perf_counter()
    parts = tensorboard.read_path(d)
    dt = time.perf_counter() - t
    m = parts[0].metrics
    n = sum(int(m.get_column(c).is_not_null().sum()) for c in ("loss", "lr", "grad_norm"))
    return dt, n, m


def time_accumulator(d: Path) -> tuple[float, int, dict]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = time.perf_counter()
    acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    dt = time.perf_counter() - t
    return dt, sum(len(v) for v in got.values()), got


def time_tbparse(d: Path) -> tuple[float, int]:
    from tbparse import SummaryReader

    t = time.perf_counter()
    df = SummaryReader(str(d)).scalars
    dt = time.perf_counter() - t
    return dt, len(df)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--skip-tbparse", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        check_writer(root)
        d = root / "run"
        t = time.perf_counter()
        write_run(d, args.points)
        size = sum(p.stat().st_size for p in d.iterdir())
        print(f"wrote {args.points:,} points x {len(TAGS)} tags, {size / 1e6:.1f} MB "
              f"in {time.perf_counter() - t:.1f}s")  # fmt: skip
        lb, n_lb, m = time_logbook(d)
        print(f"logbook           {lb:8.2f}s  {n_lb:,} points")
        acc, n_acc, got = time_accumulator(d)
        print(f"EventAccumulator  {acc:8.2f}s  {n_acc:,} points  ({acc / lb:.1f}x logbook)")
        ok = all(
            np.array_equal(
                np.array([e.value for e in got[tag]], np.float64),
                m.get_column(col).to_numpy(),
                equal_nan=True,
            )
            for tag, col in zip(TAGS, ("loss", "lr", "grad_norm"), strict=True)
        )
        print(f"same values as EventAccumulator: {ok}; points equal: {n_lb == n_acc}")
        if not args.skip_tbparse:
            tb, n_tb = time_tbparse(d)
            print(f"tbparse           {tb:8.2f}s  {n_tb:,} points  ({tb / lb:.1f}x logbook)")


if __name__ == "__main__":
    main()
