"""NVIDIA DLLogger stdout (DeepLearningExamples): ``DLL <time> - <step> <key> : <value>``.

The step part is printed as ``Training Epoch: 0 Training Iteration: 1787``, ``(0, 100)``
or ``Epoch: 0 Iteration: 100``: the iteration is the step (``global_step`` where it is
printed); ``train.loss`` / ``loss`` -> ``loss``; ``lr`` / ``learning_rate`` -> ``lr``.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "dllogger"
DESCRIPTION = (
    "NVIDIA DLLogger stdout (DLL <time> - Training Epoch: E Training Iteration: I  key : value)"
)
EXAMPLE = (
    "DLL 2021-03-12 10:00:00.123456 - Training Epoch: 0 Training Iteration: 1787 "
    " train.loss : 1.2345  lr : 0.0001"
)
MAPS = (
    "Training Iteration / Iteration / global_step->step, train.loss/loss->loss,"
    " lr/learning_rate->lr; other keys in snake_case"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile(r"(?:^|[\s\]:])DLL \d{4}-\d{2}-\d{2}")
SPEC = Spec(
    rewrite=(
        (r"^.*?(DLL \d{4}-)", "$1"),  # a record glued behind a progress bar starts at DLL
        (r"(- )\((\d+), (\d+)\)", "${1}epoch: ${2} iteration: ${3} "),
    ),
    any_value=True,
    aliases={
        "training_iteration": "step",
        "train_iteration": "step",
        "iteration": "step",
        "train_loss": "loss",
    },
)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
