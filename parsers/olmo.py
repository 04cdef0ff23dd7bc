"""AllenAI OLMo and OLMo-core: a record spread over several lines, a step line and one
metric a line after it::

    2024-02-01 12:00:00.000	node:0	olmo.train:908	INFO	[step=1/739328,epoch=0]
        train/CrossEntropyLoss=10.98
        optim/total_grad_norm=3.21

``train/CrossEntropyLoss`` -> ``loss``, ``optim/total_grad_norm`` -> ``grad_norm``,
``optim/learning_rate_group0`` -> ``lr``; the others keep their names in snake_case.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "olmo"
DESCRIPTION = "OLMo / OLMo-core records over several lines ([step=N/M] then key=value lines)"
EXAMPLE = "[step=1/739328,epoch=0]"
MAPS = (
    "[step=N/M]->step, train/CrossEntropyLoss->loss,"
    " optim/total_grad_norm->grad_norm, optim/learning_rate_group0->lr; others in"
    " snake_case"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile("\\[step=\\d+/\\d+")
SPEC = Spec(
    aliases={
        "train_crossentropyloss": "loss",
        "train_ce_loss": "loss",
        "optim_learning_rate_group0": "lr",
        "optim_lr_group0": "lr",
        "train_lr": "lr",
    }
)


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
