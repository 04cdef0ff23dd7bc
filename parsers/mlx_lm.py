"""Apple mlx-lm / mlx-examples training and LoRA output::

    Iter 25: Train loss 2.345, Learning Rate 1.000e-05, It/sec 0.512, Tokens/sec 123.4, ...
    Iter 200: Val loss 1.234, Val took 12.3s

``Iter`` -> step, ``Train loss`` -> loss, ``Learning Rate`` -> lr, ``Trained Tokens`` ->
tokens; ``Val loss`` lines are validation events.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from parsers import reader
from parsers.reader import Spec
from parsers.reader.framework import sniff_marked

NAME = "mlx-lm"
DESCRIPTION = "mlx-lm / mlx-examples (Iter N: Train loss X, Learning Rate Y, ...)"
EXAMPLE = (
    "Iter 25: Train loss 2.345, Learning Rate 1.000e-05, It/sec 0.512, Tokens/sec"
    " 123.400, Trained Tokens 1234, Peak mem 12.300 GB"
)
MAPS = (
    "Iter->step, Train loss->loss, Learning Rate->lr, Trained Tokens->tokens,"
    " It/sec, Tokens/sec, Peak mem (GB) kept"
)
SNIFF_MAX = 85
MARK = re.compile("Iter \\d+: (?:Train|Val) loss")
SPEC = Spec(primary=r"^(?:<time> )?Iter #: ")  # debug lines shaped like records are not


def sniff(head: list[str]) -> int:
    """85 with a line of this framework's and a record; 75 with the line alone."""
    return sniff_marked(head, MARK, SPEC, SNIFF_MAX)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    return reader.read(lines, name, SPEC)
