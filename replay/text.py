"""Real text on every machine without a download: the Python standard library's source.

The corpus is the ``.py`` files of the running interpreter's standard library (code,
docstrings, comments, and a few data tables such as the codecs' character maps), test
suites and installed packages left out, read in sorted path order and joined with a
blank line, each cut to its first 8 KiB (so no one kind of file, such as the codecs'
tables, dominates), runs of one byte longer than 16 cut to 16 (a line of ``#``: what a
pretraining pipeline's quality filter takes out), up to ``max_bytes``. Tokens are its
UTF-8 bytes (vocabulary 256), so no tokenizer has to be trained or shipped.

The batch of step ``k`` is a pure function of ``(seed, k)``: ``batch_size`` windows of
``block_size + 1`` bytes at offsets drawn from a generator seeded by both. Batches
differ in kind (prose in a docstring, a table of hex numbers, deeply indented code),
which a generated stream never does.

Another Python release has other sources: the corpus's SHA-256 (``fingerprint``) is kept
with a recording, and a replay on another corpus is told so.

"""

from __future__ import annotations

import hashlib
import re
import sysconfig
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from logbook.errors import UsageError

if TYPE_CHECKING:
    from replay.data import DataConfig

RUN = 16
PER_FILE = 8192  # bytes of each file at most: no one file's kind dominates
_RUNS = re.compile(rb"(.)\1{%d,}" % RUN, re.DOTALL)
SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@lru_cache(maxsize=4)
def corpus(max_bytes: int) -> tuple[Tensor, str]:
    """The corpus as a 1-d uint8 tensor, and its SHA-256 (hex); read once per process."""
    root = stdlib_root()
    files = sorted(
        p for p in root.rglob("*.py") if not SKIP_DIRS.intersection(p.relative_to(root).parts[:-1])
    )
    chunks, size = [], 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        data = data[:PER_FILE]
        chunks.append(data + b"\n\n")
        size += len(data) + 2
        if size >= max_bytes:
            break
    # the quality filter of a pretraining pipeline, in its simplest form: a run of one
    # byte (a line of '#' or '=') is cut to RUN bytes
    blob = _RUNS.sub(lambda m: m.group(1) * RUN, b"".join(chunks))[:max_bytes]
    if len(blob) < 4096:
        raise UsageError(f"replay data: the standard library at {root} holds too little text")
    digest = hashlib.sha256(blob).hexdigest()
    return torch.frombuffer(bytearray(blob), dtype=torch.uint8), digest


class TextStream:
    """Batches of ``(inputs, targets)``, each ``(batch_size, block_size)`` int64 bytes."""

    def __init__(self, cfg: DataConfig, vocab_size: int, block_size: int, batch_size: int):
        if vocab_size < 256:
            raise UsageError(
                f"replay config: data.source 'stdlib' needs model.vocab_size >= 256 "
                f"(bytes), not {vocab_size}"
            )
        self.cfg, self.T, self.B = cfg, block_size, batch_size
        self.tokens, self.fingerprint = corpus(cfg.max_bytes)
        if self.tokens.numel() <= block_size + 1:
            raise UsageError("replay data: the text corpus is shorter than one sequence")
        self.span = torch.arange(block_size + 1)

    def batch(self, seed: int, step: int) -> tuple[Tensor, Tensor]:
        """The batch of training step ``step`` for data-order ``seed``."""
        from replay.data import mix

        g = torch.Generator().manual_seed(mix(seed, step, 1))
        n = self.tokens.numel() - self.T - 1
        starts = torch.randint(0, n, (self.B,), generator=g)
        seq = self.tokens[starts.unsqueeze(1) + self.span].long()
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
