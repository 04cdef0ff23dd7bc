"""modded-nanogpt (the NanoGPT speedrun) and its ``train_gpt.py`` forks::

    step:242/1660 train_time:22168ms step_avg:91.60ms
    step:250/1660 val_loss:3.9653 train_time:22900ms step_avg:91.60ms
    step:100/5100 train_loss:4.5130 train_time:9137ms step_avg:91.37ms

``step:N/M`` is the step and its total; the training lines of recent versions print no
loss, only the time (``train_time`` the time trained so far, kept as ``train_time_ms``;
``step_avg`` the mean step time, ``step_time_s``): they are records all the same;
``val_loss`` lines are validation events.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "modded-nanogpt"
DESCRIPTION = "modded-nanogpt speedrun stdout (step:N/M train_time:Xms step_avg:Yms)"
EXAMPLE = "step:242/1660 train_time:22168ms step_avg:91.60ms"
MAPS = (
    "step:N/M->step (M->train_iters), train_loss->loss, step_avg (ms)->step_time_s,"
    " train_time (ms, so far)->train_time_ms; val_loss lines->validation"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(r"^\s*step:\d+/\d+ (?:train_loss|val_loss|train_time):")
SPEC = Spec(aliases={"step_avg": "step_time_s", "train_time": "train_time_ms"}, any_value=True)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
