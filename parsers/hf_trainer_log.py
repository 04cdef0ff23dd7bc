"""The Hugging Face ``Trainer``'s stdout: the dicts it prints every ``logging_steps``::

    {'loss': 2.3115, 'grad_norm': 0.77, 'learning_rate': 4.9e-05, 'epoch': 0.02}

also with typographic quotes (as pasted into issues), string values, tqdm bars and
carriage returns around them, and DeepSpeed's overflow messages glued on. No step is
printed: records are numbered in order, times ``logging_steps`` when the output states
it (a caveat says so). ``eval_*`` dicts are validation events, the closing
``train_runtime`` dict is a summary.
"""

from __future__ import annotations

import re

import polars as pl

from logbook.parsed import Parsed
from parsers import reader
from parsers.reader import Spec
from parsers.reader.framework import sniff_marked

NAME = "hf-trainer-log"
DESCRIPTION = "Hugging Face Trainer stdout ({'loss': ..., 'learning_rate': ..., 'epoch': ...})"
EXAMPLE = "{'loss': 2.3115, 'grad_norm': 0.7712, 'learning_rate': 4.9e-05, 'epoch': 0.02}"
MAPS = (
    "loss->loss, learning_rate->lr, grad_norm->grad_norm, epoch kept; records"
    " numbered (x logging_steps); eval_* dicts->validation"
)
SNIFF_MAX = 80
MARK = re.compile(
    "\\{\\s*['\\u2018\\u2019\\\"](?:loss|eval_loss|train_runtime|learning_rate)['\\u2018\\u2019\\\"]\\s*:"
)
SPEC = Spec()


def sniff(head: list[str]) -> int:
    """80 with a line of this framework's and a record; 70 with the line alone."""
    return sniff_marked(head, MARK, SPEC, SNIFF_MAX)


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    return reader.read(lines, name, SPEC)
