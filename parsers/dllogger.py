"""NVIDIA DLLogger stdout (DeepLearningExamples): ``DLL <time> - <step> <key> : <value>``,
and its JSON backend's file (``DLLL {"timestamp": ..., "step": [0, 12], "data": {...}}``).

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
MARK = re.compile(r'(?:^|[\s\]:])DLL \d{4}-\d{2}-\d{2}|^DLLL \{"timestamp": ')
# the JSON backend's lines (``dllogger.json``): ``DLLL {"timestamp": ..., "datetime": ...,
# "elapsedtime": ..., "type": "LOG", "step": [0, 12] | 12 | "PARAMETER", "data": {...}}``
_JSON = (
    r'^DLLL \{"timestamp": "[^"]*", "datetime": "([^"]+)", "elapsedtime": "[^"]*", "type": "LOG", '
)
SPEC = Spec(
    rewrite=(
        (r"^.*?(DLL \d{4}-)", "$1"),  # a record glued behind a progress bar starts at DLL
        (r"(- )\((\d+), (\d+)\)", "${1}epoch: ${2} iteration: ${3} "),
        # a step [epoch, iteration] or an iteration, then the data dict
        (
            _JSON + r'"step": \[(\d+), (\d+)\], "data": (\{.*\})\}\s*$',
            "DLL $1 - epoch: $2 iteration: $3 $4",
        ),
        (_JSON + r'"step": (\d+), "data": (\{.*\})\}\s*$', "DLL $1 - iteration: $2 $3"),
        # BERT's run_pretraining logs the loss scale (alone) when it backs off on overflow
        (
            _JSON + r'"step": "PARAMETER", "data": \{"loss_scale": ([\d.eE+-]+)\}\}\s*$',
            "DLL $1 - gradient overflow, reducing loss scale to $2",
        ),
        (_JSON + r'"step": "PARAMETER", .*$', ""),  # the run's settings: no record, no event
    ),
    any_value=True,
    aliases={
        "training_iteration": "step",
        "train_iteration": "step",
        "iteration": "step",
        "train_loss": "loss",
        "loss_scaler": "loss_scale",  # TensorFlow BERT's ``loss_scaler : 4294967296``
    },
)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
