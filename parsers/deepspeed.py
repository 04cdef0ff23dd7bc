"""DeepSpeed's own stdout and the DeepSpeed-Chat / DeepSpeedExamples training scripts::

    [Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]
    steps: 10 loss: 2.3 iter time (s): 0.51 samples/sec: 62.7
    [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768

Where a script prints its own records with a loss, DeepSpeed's engine lines
(``step=N, skipped=..., lr=[...]``) are left to it; OVERFLOW lines are overflow
events.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "deepspeed"
DESCRIPTION = "DeepSpeed stdout ([Rank 0] step=N, skipped=S, lr=[...]; steps: N loss: X)"
EXAMPLE = (
    "[2023-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10,"
    " skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]"
)
MAPS = (
    "step/steps->step, loss->loss, lr (first group)->lr, skipped->skipped; OVERFLOW!->overflow_skip"
)
SNIFF_MAX = 70
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(
    r"\[Rank \d+\] step=\d+, skipped=|\[deepspeed\] OVERFLOW|"
    r"DeepSpeedEngine|\[logging\.py:\d+:log_dist\]"
)
SPEC = Spec(secondary=r"\[Rank #\] step=#, skipped=#")


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
