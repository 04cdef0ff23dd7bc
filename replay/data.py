"""The replay's data: real text or a generated stream, and pathological batches.

``source`` picks the stream: ``stdlib`` (default) is real text, the Python standard
library's own source as bytes (``replay/text.py``); ``phrases`` is the generated stream
below, faster to build and learn, for tests and quick checks.

The generated stream (``phrases``), which the project makes itself (no downloads):

The "language" is a fixed dictionary of phrases (2-8 tokens each, drawn from
``language_seed``) used with Zipfian frequencies, plus a little token noise: a model
learns the phrases (loss falls well below log V) but never reaches zero loss.

The batch at step ``k`` is a pure function of ``(seed, k)``: each step seeds its own
generator, so skipping a range of steps, rewinding, or replaying from a checkpoint never
changes any other step's batch.

Pathological batches (``bad_from``, ``bad_steps``, ``bad_kind``), in either source: the
batches of steps ``bad_from .. bad_from + bad_steps - 1`` are replaced by bad data, the
way a run meets a shard of repeated or corrupted sequences: ``repeat`` (each sequence
one token over and over), ``noise`` (uniform random tokens) or ``copy`` (the batch's
first sequence in every row). Skipping those steps (``skip:A-B``) removes them.

A small pool of batches (``pool_from``, ``pool_size``): from step ``pool_from`` on, the
steps draw the ``pool_size`` batches of one fixed small dataset (the same for every
seed), each pass over it in an order drawn from the seed, the way a run goes over a tiny
dataset epoch after epoch (a fine-tune on a few hundred examples): the model learns the
pool by heart and its loss falls towards zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

_MASK64 = (1 << 64) - 1


def mix(*values: int) -> int:
    """A 63-bit seed from integers (splitmix64 finalizer over each value in turn)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK64)) & _MASK64
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK64
        h ^= h >> 31
    return h >> 1


@dataclass(kw_only=True)
class DataConfig:
    source: str = "stdlib"  # "stdlib" (real text, bytes) or "phrases" (generated)
    max_bytes: int = 4_000_000  # of the stdlib corpus
    bad_from: int = 0  # first step of the pathological batches
    bad_steps: int = 0  # how many (0: none)
    bad_kind: str = "repeat"  # repeat | noise | copy
    pool_from: int = 0  # from this step on, the batches of a small pool over and over
    pool_size: int = 0  # how many batches the pool holds (0: no pool)
    language_seed: int = 1234  # the phrase dictionary: the same for every run and seed
    n_phrases: int = 512
    min_len: int = 2
    max_len: int = 8
    zipf: float = 1.1  # phrase frequency ~ rank ** -zipf
    noise: float = 0.05  # fraction of tokens replaced by a uniform random token


class TokenStream:
    """Batches of ``(inputs, targets)``, each ``(batch_size, block_size)`` int64."""

    def __init__(self, cfg: DataConfig, vocab_size: int, block_size: int, batch_size: int):
        self.cfg, self.vocab, self.T, self.B = cfg, vocab_size, block_size, batch_size
        g = torch.Generator().manual_seed(mix(cfg.language_seed, 0))
        self.table = torch.randint(0, vocab_size, (cfg.n_phrases, cfg.max_len), generator=g)
        self.lengths = torch.randint(cfg.min_len, cfg.max_len + 1, (cfg.n_phrases,), generator=g)
        ranks = torch.arange(1, cfg.n_phrases + 1, dtype=torch.float64)
        self.probs = ranks.pow(-cfg.zipf)
        self.probs /= self.probs.sum()
        # Enough phrases per row that their tokens always cover block_size + 1.
        self.per_row = (block_size + 1) // cfg.min_len + 1

    def batch(self, seed: int, step: int) -> tuple[Tensor, Tensor]:
        """The batch of training step ``step`` for data-order ``seed``."""
        g = torch.Generator().manual_seed(mix(seed, step, 1))
        ids = torch.multinomial(self.probs, self.B * self.per_row, True, generator=g)
        ids = ids.view(self.B, self.per_row)
        tokens = self.table[ids].flatten(1)  # (B, per_row * max_len)
        valid = (torch.arange(self.cfg.max_len) < self.lengths[ids].unsqueeze(-1)).flatten(1)
        # Move each row's valid tokens to its front, keeping their order.
        order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices
        seq = tokens.gather(1, order)[:, : self.T + 1]
        noisy = torch.rand(seq.shape, generator=g) < self.cfg.noise
        seq = torch.where(noisy, torch.randint(0, self.vocab, seq.shape, generator=g), seq)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


SOURCES = ("stdlib", "phrases")
POOL_SEED = 0  # the pool is one dataset for every data-order seed: only its order varies
BAD_KINDS = ("repeat", "noise", "copy")


class Stream:
    """The configured source, with its pathological batches in place."""

    def __init__(self, cfg: DataConfig, vocab_size: int, block_size: int, batch_size: int):
        from logbook.errors import UsageError

        if cfg.source not in SOURCES:
            raise UsageError(f"replay config: data.source must be one of {list(SOURCES)}")
        if cfg.bad_kind not in BAD_KINDS:
            raise UsageError(f"replay config: data.bad_kind must be one of {list(BAD_KINDS)}")
        self.cfg, self.vocab = cfg, vocab_size
        if cfg.source == "stdlib":
            from replay.text import TextStream

            self.inner = TextStream(cfg, vocab_size, block_size, batch_size)
            self.fingerprint: str | None = self.inner.fingerprint
        else:
            self.inner = TokenStream(cfg, vocab_size, block_size, batch_size)
            self.fingerprint = None

    def pool_index(self, seed: int, step: int) -> int:
        """Which batch of the pool step ``step`` draws: the pool in an order of its own
        each pass over it (an epoch), drawn from ``(seed, epoch)``."""
        c = self.cfg
        epoch, i = divmod(step - c.pool_from, c.pool_size)
        g = torch.Generator().manual_seed(mix(seed, epoch, 5))
        return int(torch.randperm(c.pool_size, generator=g)[i])

    def is_bad(self, step: int) -> bool:
        c = self.cfg
        return c.bad_steps > 0 and c.bad_from <= step < c.bad_from + c.bad_steps

    def batch(self, seed: int, step: int) -> tuple[Tensor, Tensor]:
        """The batch of training step ``step`` for data-order ``seed``."""
        c = self.cfg
        if c.pool_size > 0 and step >= c.pool_from:
            x, y = self.inner.batch(POOL_SEED, c.pool_from + self.pool_index(seed, step))
        else:
            x, y = self.inner.batch(seed, step)
        if not self.is_bad(step):
            return x, y
        seq = torch.cat([x, y[:, -1:]], dim=1)
        g = torch.Generator().manual_seed(mix(seed, step, 3))
        kind = self.cfg.bad_kind
        if kind == "noise":
            seq = torch.randint(0, self.vocab, seq.shape, generator=g)
        elif kind == "copy":
            seq = seq[:1].expand(seq.shape).clone()
        else:
            tok = torch.randint(0, self.vocab, (seq.shape[0], 1), generator=g)
            seq = tok.expand(seq.shape).clone()
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
