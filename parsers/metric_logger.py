"""The ``MetricLogger`` of the torchvision references and the models that copied it
(DeiT, DINO, DINOv2, MAE, BEiT, ...)::

    Epoch: [3]  [  40/1251]  eta: 0:10:00  lr: 0.000100  loss: 6.9104 (6.9312)  time: 0.5

Each value is followed by its running mean in parentheses (kept as ``<column>_avg``).
The counter restarts every epoch: step = epoch x N + i for ``[i/N]`` (epochs counted
from 0). A line with ``Test:`` is a validation event.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "metric-logger"
DESCRIPTION = "torchvision/DeiT/DINO MetricLogger (Epoch: [e]  [i/N]  eta: ...  loss: v (mean))"
EXAMPLE = (
    "Epoch: [3]  [  40/1251]  eta: 0:10:00  lr: 0.000100  loss: 6.9104 (6.9312) "
    " time: 0.5012  data: 0.0100  max mem: 1234"
)
MAPS = (
    "Epoch: [e] [i/N]->step e*N+i; loss->loss, loss (mean)->loss_avg, lr->lr,"
    " time->step_time_s, data, max mem kept"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(
    r"\[\s*\d+/\d+\]\s+eta:|"
    r"Epoch: \[\d+\]\s+\[\s*\d+/\d+\]|Train: \[\s*\d+\]\s+\[\s*\d+/\d+\]"
)
SPEC = Spec(epoch_base=0)  # torchvision counts epochs from 0


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
