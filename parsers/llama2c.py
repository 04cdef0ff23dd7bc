"""karpathy/llama2.c ``train.py``::

    1230 | loss 1.2345 | lr 1.000000e-04 | 123.45ms | mfu 1.23%
    step 2000: train loss 1.2300, val loss 1.2500

The leading number is the step; the unnamed ``ms`` value is the time per step.
"""

from __future__ import annotations

import re

from parsers.reader import Spec
from parsers.reader.framework import reader_format

NAME = "llama2c"
DESCRIPTION = "llama2.c train.py (N | loss X | lr Y | Zms | mfu W%)"
EXAMPLE = "1230 | loss 1.2345 | lr 1.000000e-04 | 123.45ms | mfu 1.23%"
MAPS = (
    "leading number->step, loss->loss, lr->lr, ms->step_time_s, mfu (%)->mfu_pct;"
    " 'step N: train loss, val loss'->validation"
)
SNIFF_MAX = 85
STREAMS = True  # each line read on its own: a large file is read in blocks
MARK = re.compile("^\\s*\\d+ \\| loss [-+\\d.naif]+ \\| lr ")
SPEC = Spec()


sniff, parse = reader_format(MARK, SPEC, SNIFF_MAX)
