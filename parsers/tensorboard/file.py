"""One TensorBoard event file -> its scalar points, with every record accounted for.

Each record is used (it holds a scalar), ignored (the file-version header, graphs,
histograms, images, text and other non-scalar summaries) or unrecognized (its data
fails the CRC, or it is not a well-formed event). A file cut short inside a record (a
writer killed mid-write) or with a corrupt length field ends there: the rest counts as
one unrecognized record and a caveat says how many bytes were left unread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from logbook.errors import InputError
from parsers.tensorboard import tfrecord as tfr
from parsers.tensorboard.proto import Points, decode

_VECTOR_CRC_MAX = 1 << 16  # longer records get their CRC checked one by one


@dataclass
class EventFile:
    path: Path
    records: int  # records in the file, a cut-off tail counted as one
    points: Points
    ignored: int
    bad: np.ndarray  # 1-based numbers of the unrecognized records
    kinds: dict[str, int] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)

    @property
    def first_wall(self) -> float | None:
        w = self.points.wall[np.isfinite(self.points.wall)]
        return float(w.min()) if w.size else None

    @property
    def last_wall(self) -> float | None:
        w = self.points.wall[np.isfinite(self.points.wall)]
        return float(w.max()) if w.size else None


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def looks_like_events(raw: bytes) -> bool:
    """A first record whose length passes its CRC and whose data opens an Event
    (wall_time, field 1, fixed 64 bits)."""
    if len(raw) < tfr.HEADER + 1:
        return False
    head = np.frombuffer(raw[:12], np.uint8)
    crc = tfr.mask(tfr.crc32c(head, np.array([0]), np.array([8])))[0]
    n = int.from_bytes(raw[:8], "little")
    return int.from_bytes(raw[8:12], "little") == int(crc) and n > 0 and raw[12] == 0x09


def read_event_file(path: Path) -> EventFile:
    raw = read_bytes(path)
    fr = tfr.frame(raw)
    data = np.frombuffer(raw, dtype=np.uint8)
    n = fr.offsets.size
    crc_ok = _crc_ok(raw, data, fr)
    good = np.flatnonzero(crc_ok)
    with np.errstate(invalid="ignore", over="ignore"):  # a signalling NaN is still a NaN
        dec = decode(data, fr.data_starts[good], fr.lengths[good])
    pts = dec.points
    pts.record = good[pts.record]
    bad = np.sort(np.concatenate([np.flatnonzero(~crc_ok), good[dec.bad]]))
    caveats = []
    if (~crc_ok).any():
        caveats.append(f"{path.name}: {int((~crc_ok).sum())} record(s) failed their CRC: skipped")
    tail = _tail(path, fr, len(raw))
    if tail:
        caveats.append(tail)
        bad = np.append(bad, n)
    return EventFile(
        path=path,
        records=n + (1 if tail else 0),
        points=pts,
        ignored=int(dec.ignored.size),
        bad=(bad + 1).astype(np.int64),
        kinds=dec.kinds,
        caveats=caveats,
    )


def _crc_ok(raw: bytes, data: np.ndarray, fr: tfr.Framing) -> np.ndarray:
    ok = np.ones(fr.offsets.size, bool)
    short = np.flatnonzero(fr.lengths <= _VECTOR_CRC_MAX)
    if short.size:
        ok[short] = tfr.data_crc_ok(data, fr, short)
    view = memoryview(raw)
    for i in np.flatnonzero(fr.lengths > _VECTOR_CRC_MAX).tolist():
        s, n = int(fr.data_starts[i]), int(fr.lengths[i])
        stored = int.from_bytes(view[s + n : s + n + 4], "little")
        computed = int(tfr.mask(np.array([tfr.crc32c_bytes(view[s : s + n])], np.uint32))[0])
        ok[i] = stored == computed
    return ok


def _tail(path: Path, fr: tfr.Framing, size: int) -> str | None:
    if fr.bad_header is not None:
        left = size - fr.bad_header
        return f"{path.name}: corrupt record length at byte {fr.bad_header}: {left} byte(s) unread"
    if fr.truncated is not None:
        left = size - fr.truncated
        return (
            f"{path.name}: ends inside a record at byte {fr.truncated} (the writer stopped "
            f"mid-write): {left} byte(s) unread"
        )
    return None
