"""pytorch-CycleGAN-and-pix2pix's ``loss_log.txt`` (and its forks': GANILLA, ...)::

    ================ Training Loss (Sat Mar 23 18:15:36 2024) ================
    (epoch: 1, iters: 100, time: 1.027, data: 0.113) D_A: 0.565 G_A: 0.818 cycle_A: 14.891

One header a launch, then one line a print: the epoch, the images seen in it
(``iters``), the compute and data-loading seconds of an image, and each loss by name.
No global step is printed: the step is (epoch - 1) x N + iters, N being the images an
epoch has. N is read off the prints: they come every ``print_freq`` images counted over
the launch, so two prints in a row across an epoch's end, at ``i`` in one epoch and at
``j`` in the next, are N - i + j = print_freq images apart (an interval printed within
epochs). Without such a pair N is the largest ``iters`` printed, and in a log of one
epoch the step is ``iters`` (a caveat says which).

A GAN has no one loss: ``loss`` is the generator's objective, the sum of its printed
terms (``G_*``, ``cycle_*`` or 2017's ``Cyc_*``, ``idt_*``: the trainer prints them
weighted, as it adds them), the discriminator's terms being columns of their own (every
key in snake_case).
A launch that starts past the first epoch (``--continue_train --epoch_count E``) is a
resume: a ``restart`` at its header; one from the first epoch is left to the run
splitting (another run, or the same run relaunched with its epoch counter reset, as the
losses tell).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Restart, Source
from parsers.columns import snake, with_core
from parsers.reader.extract import COMMENT

NAME = "cyclegan"
DESCRIPTION = "pytorch-CycleGAN-and-pix2pix loss_log.txt ((epoch: E, iters: I, ...) G_A: ...)"
EXAMPLE = "(epoch: 1, iters: 100, time: 1.027, data: 0.113) D_A: 0.565 G_A: 0.818 cycle_A: 14.891"
MAPS = (
    "(epoch - 1) x images an epoch + iters->step, epoch->epoch, time->compute_s, "
    "data->data_s, G_*+cycle_*+idt_*->loss, every loss by name; a header->a launch"
)
SNIFF_MAX = 85

_LINE = re.compile(
    r"^\s*\(epoch: (\d{1,9}), iters: (\d{1,15}), time: ([^,()]*)(?:, data: ([^,()]*))?\)(.*)$"
)
_HEADER = re.compile(r"^=+ Training Loss \((.*)\) =+\s*$")
_PAIR = re.compile(r"([A-Za-z_][\w]*): (\S+)")
_GENERATOR = re.compile(r"^(?:g(?:_|$)|cycle_|cyc_|idt_)")
_TAKEN = {"line", "epoch", "iters", "step", "loss", "time", "compute_s", "data_s"}
_COMMENT = re.compile(COMMENT)


def sniff(head: list[str]) -> int:
    """85 for a line of the layout, else 0."""
    return SNIFF_MAX if any(_LINE.match(t) for t in head) else 0


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _stamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    rows: list[dict] = []
    launches: list[tuple[int, datetime | None, str]] = []  # header line, its time, text
    launch_of: list[int] = []  # each row's launch (its index in ``launches``)
    left: list[int] = []
    ignored = 0
    for n, t in lines.select("line", "text").iter_rows():
        if m := _LINE.match(t):
            row: dict = {"line": n, "epoch": int(m.group(1)), "iters": int(m.group(2))}
            # (the data time came in 2018: ``(epoch: 1, iters: 100, time: 0.3)`` before)
            row["compute_s"], row["data_s"] = _float(m.group(3)), _float(m.group(4))
            for key, value in _PAIR.findall(m.group(5)):
                # (snake_case, as every format names a key of its own; a key that is
                # also a column of the schema is kept apart)
                col = snake(key)
                row[col if col not in _TAKEN else f"{col}_field"] = _float(value)
            rows.append(row)
            launch_of.append(len(launches) - 1)
        elif h := _HEADER.match(t):
            launches.append((n, _stamp(h.group(1)), t.strip()))
        elif not t.strip() or _COMMENT.match(t.strip()):
            ignored += 1
        else:
            left.append(n)
    events, caveats = _launch_events(rows, launch_of, launches, name), []
    metrics = pl.DataFrame(rows) if rows else pl.DataFrame()
    if metrics.height:
        metrics, caveat = _steps(metrics, launch_of)
        caveats.append(caveat)
        gen = [c for c in metrics.columns if _GENERATOR.match(c)]
        if gen:
            metrics = metrics.with_columns(pl.sum_horizontal(gen).alias("loss"))
            caveats.append(f"loss: the generator's objective, {' + '.join(gen)}")
        metrics = metrics.with_columns(pl.col("epoch").cast(pl.Float64)).drop("iters")
    # the header lines are the launch events' own lines (counted as event lines)
    return Parsed(
        metrics=with_core(metrics),
        events=events,
        meta={"caveats": caveats} if caveats else {},
        unrecognized=pl.Series("line", left, dtype=pl.Int64),
        ignored=ignored + len(launches) - len(events),
    )


def _steps(metrics: pl.DataFrame, launch_of: list[int]) -> tuple[pl.DataFrame, str]:
    """The records with ``step`` = (epoch - 1) x N + iters, and the caveat saying how
    N was found."""
    epoch = metrics.get_column("epoch").to_numpy()
    iters = metrics.get_column("iters").to_numpy()
    launch = np.array(launch_of)
    same = launch[1:] == launch[:-1]
    within = same & (epoch[1:] == epoch[:-1]) & (iters[1:] > iters[:-1])
    across = same & (epoch[1:] == epoch[:-1] + 1)
    diffs = Counter((iters[1:] - iters[:-1])[within].tolist())
    sizes: Counter = Counter()
    if diffs:
        every = diffs.most_common(1)[0][0]
        ends = every + iters[:-1][across] - iters[1:][across]
        sizes = Counter(int(v) for v, i in zip(ends, iters[:-1][across], strict=True) if v >= i)
    if not sizes and int(epoch.max()) == int(epoch.min()):
        # one epoch and no length: the images seen in it
        caveat = f"no step printed: step = iters (the images seen in epoch {int(epoch[0])})"
        return metrics.with_columns(pl.Series("step", iters, pl.Int64)), caveat
    if sizes:
        size = sizes.most_common(1)[0][0]
        how = f"{size} images an epoch, read off the prints across an epoch's end"
    else:
        size = int(iters.max())
        how = f"{size} images an epoch taken as the largest iters printed (no epoch's end shows)"
    step = (epoch.astype(np.int64) - 1) * size + iters
    caveat = f"no step printed: step = (epoch - 1) x {size} + iters, {how}"
    return metrics.with_columns(pl.Series("step", step, pl.Int64)), caveat


def _launch_events(
    rows: list[dict], launch_of: list[int], launches: list[tuple], name: str
) -> list[EventBase]:
    """A ``restart`` at the header of each launch whose first print is past the first
    epoch (a resume with ``--epoch_count``)."""
    first: dict[int, dict] = {}
    for row, k in zip(rows, launch_of, strict=True):
        first.setdefault(k, row)
    out: list[EventBase] = []
    for k, row in first.items():
        if k < 0 or row["epoch"] <= 1:
            continue
        line, time, text = launches[k]
        src = Source(file=name, line=line)
        out.append(Restart(time=time, assumed_tz="UTC" if time else None, source=src, text=text))
    return out
