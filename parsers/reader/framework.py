"""What a framework module built on the reader needs: sniffing by its own marks, and
the ``sniff``/``parse`` pair the registry calls."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from logbook.blocks import LineBlocks
from logbook.parsed import Parsed
from parsers.reader import Spec, read, sniff_records


def sniff_marked(head: list[str], mark: re.Pattern[str], spec: Spec, score: int) -> int:
    """``score`` when a first line carries the framework's mark and the reader finds a
    record among them; ``score - 10`` with the mark alone (an excerpt of start-up or
    crash lines); 0 without it."""
    marked = [h for h in head if mark.search(h)]
    if not marked:
        return 0
    return score if sniff_records(head, spec) else score - 10


def reader_format(
    mark: re.Pattern[str], spec: Spec, score: int
) -> tuple[Callable[[list[str]], int], Callable[[pl.DataFrame | LineBlocks, str], Parsed]]:
    """The ``sniff`` and ``parse`` of a format that is the reader with ``spec``, known
    by ``mark`` (see :func:`sniff_marked`)."""

    def sniff(head: list[str]) -> int:
        return sniff_marked(head, mark, spec, score)

    def parse(lines: pl.DataFrame | LineBlocks, name: str) -> Parsed:
        return read(lines, name, spec)

    sniff.__doc__ = f"{score} with a line of this framework's and a record, {score - 10} alone."
    parse.__doc__ = "The records and events of one log, read by the tolerant reader."
    return sniff, parse
