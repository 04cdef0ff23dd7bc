"""Darknet's ``detector train`` (pjreddie/darknet, AlexeyAB/darknet: YOLOv2 to YOLOv4),
one line per iteration::

     174: 933.341797, 780.749146 avg loss, 0.000000 rate, 3.172139 seconds, 11136 images
     1: 1234.5, 1234.5 avg, 0.000100 rate, 2.3 seconds, 64 images, 17.99 hours left

The leading number is the iteration (the step), then that iteration's loss and its
running mean, the learning rate, the seconds the iteration took and the images seen so
far. The ``Region 82 Avg IOU: ...`` lines between them and the mAP lines are no records;
``-nan`` is a NaN loss.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "darknet"
DESCRIPTION = "Darknet detector train (N: loss, avg loss, rate, seconds, images)"
EXAMPLE = " 174: 933.341797, 780.749146 avg loss, 0.000000 rate, 3.172139 seconds, 11136 images"
MAPS = (
    "leading number->step, first value->loss, avg (loss)->loss_avg, rate->lr, "
    "seconds->step_time_s, images->samples"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
_V = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
_LINE = rf"^\s*(\d+):\s*{_V},\s*{_V} avg(?: loss)?,\s*{_V} rate,\s*{_V} seconds,\s*(\d+) images"
MARK = re.compile(_LINE, re.IGNORECASE)
SPEC = Spec(
    rewrite=(
        (
            "(?i)" + _LINE,
            "step ${1} loss ${2} loss_avg ${3} lr ${4} step_time_s ${5} samples ${6},",
        ),
    ),
    primary=r"^step # loss #",
)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
