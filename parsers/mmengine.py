"""OpenMMLab logs (mmengine, MMDetection, MMSegmentation, mmpretrain, xtuner) and the
older mmcv runner.

Lines read::

    2023/05/12 10:11:12 - mmengine - INFO - Iter(train) [  200/1000]  lr: 1.0e-04  ...  loss: 2.34
    2023/05/12 10:11:12 - mmengine - INFO - Epoch(train)  [1][ 50/500]  lr: ...  loss: 1.2
    2021-01-01 10:00:00,000 - mmdet - INFO - Epoch [1][50/1000]	lr: 2.000e-02, ..., loss: 1.23

``Iter(train) [i/N]`` -> step i; in epoch-based runs the step is counted over epochs:
``(epoch - 1) x N + i`` (epochs are numbered from 1); ``Epoch(val)`` lines are
validation events.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "mmengine"
DESCRIPTION = "OpenMMLab mmengine / mmcv logs (Iter(train) [i/N], Epoch [e][i/N])"
EXAMPLE = (
    "2023/05/12 10:11:12 - mmengine - INFO - Iter(train) [  200/1000]  lr:"
    " 1.0000e-04  eta: 0:10:00  time: 0.5012  data_time: 0.0100  memory: 1234  loss:"
    " 2.3400"
)
MAPS = (
    "Iter(train) [i/N]->step i; Epoch(train) [e][i/N]->step (e-1)*N+i; lr, loss,"
    " grad_norm, time (s)->step_time_s, data_time, memory (MB) kept; loss_* terms"
    " kept"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(
    r"Iter\((?:train|val|test)\)|Epoch\((?:train|"
    r"val|test)\)|- mmengine - |Epoch \[\d+\]\[\s*\d+/\d+\]"
)
SPEC = Spec(epoch_base=1, aliases={"iter_train": "step", "epoch_train": "epoch"})


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
