"""The metric file of karpathy/build-nanogpt's ``train_gpt2.py`` (``log/log.txt``) and
its forks: one ``{step} {stream} {value}`` line a value::

    0 val 10.9310
    0 hella 0.2413
    0 train 10.934416
    1 train 10.883945

``train`` lines are the records (the loss); ``val`` (validation loss) and ``hella``
(HellaSwag accuracy) lines are evaluations.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "nanogpt-logtxt"
DESCRIPTION = "build-nanogpt's log.txt ({step} train|val|hella {value})"
EXAMPLE = "1 train 10.883945"
MAPS = "N train X->step N, loss X; N val X->validation loss; N hella X->validation hella_acc"
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
_VALUE = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
MARK = re.compile(r"^\s*\d+ (?:train|val|hella) " + _VALUE + r"\s*$", re.IGNORECASE)
SPEC = Spec(
    rewrite=(
        (r"^\s*(\d+) train " + _VALUE + r"\s*$", "step ${1} loss ${2}"),
        (r"^\s*(\d+) val " + _VALUE + r"\s*$", "step ${1} val_loss ${2}"),
        (r"^\s*(\d+) hella " + _VALUE + r"\s*$", "step ${1} val_hella_acc ${2}"),
    )
)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
