"""Apple mlx-lm / mlx-examples training and LoRA output::

    Iter 25: Train loss 2.345, Learning Rate 1.000e-05, It/sec 0.512, Tokens/sec 123.4, ...
    Iter 200: Val loss 1.234, Val took 12.3s

``Iter`` -> step, ``Train loss`` -> loss, ``Learning Rate`` -> lr, ``Trained Tokens`` ->
tokens; ``Val loss`` lines are validation events.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

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
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile("Iter \\d+: (?:Train|Val) loss")
SPEC = Spec(primary=r"^(?:<time> )?Iter #: ")  # debug lines shaped like records are not


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
