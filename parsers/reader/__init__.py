"""The tolerant metrics-line reader under every text format.

It finds the records of a file from its repeated line shapes instead of a grammar per
framework: lines are cleaned of what logs put around them (:mod:`.clean`), reduced to
shapes, one example line per shape is read into a template (:mod:`.templates`), and
every line of a template is then extracted in one polars pass (:mod:`.extract`).
Frameworks add a :class:`Spec`: their own key aliases, step rule, record rules and quirks.

Every line is accounted for: a record (or part of one: ``meta["continued_lines"]``),
an event, ignored (blank, collector comments, traceback bodies, summaries, per-rank
copies of a record) or unrecognized.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from logbook.blocks import LineBlocks
from logbook.parsed import Parsed


@dataclass(frozen=True)
class Spec:
    """What a framework adds to the reader."""

    aliases: dict[str, str] = field(default_factory=dict)  # normalized key -> column
    # the first epoch's number, for steps counted within epochs (None: 1 where the
    # file's epochs start at 1, else 0)
    epoch_base: int | None = None
    epoch_steps: bool = True  # ``epoch E ... [i/N]`` without a step key: step E*N + i
    counter_steps: bool = False  # else (epoch_steps off) the counter i is the step
    convert: Callable[[pl.DataFrame], pl.DataFrame] | None = None  # column fix-ups
    rewrite: tuple[tuple[str, str], ...] = ()  # (regex, replacement) on each cleaned line
    any_value: bool = False  # a step and any named value make a record (no loss logged)
    # record shapes that are records only in a file with no other record shape (an
    # engine's own progress line beside a script's records)
    secondary: str | None = None
    primary: str | None = None  # if set, only record shapes matching it are records


DEFAULT = Spec()


def read(lines: pl.DataFrame | LineBlocks, name: str, spec: Spec = DEFAULT) -> Parsed:
    """The records and events of one text log (``lines``: the frame of physical lines,
    or the blocks of a large file)."""
    from parsers.reader.extract import read_frame

    return read_frame(lines, name, spec)


def sniff_records(head: list[str], spec: Spec = DEFAULT) -> int:
    """How many of the first lines are records of a repeated shape (0: none)."""
    from parsers.reader.shapes import count_records

    return count_records(head, spec)
