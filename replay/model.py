"""A small decoder-only transformer, in one file, with the switches that matter for
training stability and the instrumentation that shows them coming.

Switches: ``qk_norm`` (LayerNorm on queries and keys, per head: bounds the attention
logits), fp16's range for the attention scores (``fp16``: a score past 65504 overflows to
inf and its softmax row to NaN, as a score computed in fp16 does) and the z-loss
coefficient (passed to :meth:`GPT.forward`: pulls the output
log-partition ``log Z`` towards 0). Instrumentation (``instrument=True``) returns, per
forward pass, the max attention logit over all layers and heads, each layer's mean
activation norm, and the mean output ``log Z``, as detached tensors (no host sync).

The default config trains at well over 20 steps/s on one CPU thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

FP16_MAX = float(torch.finfo(torch.float16).max)  # 65504


@dataclass(kw_only=True)
class ModelConfig:
    """Shape of the model. ``qk_norm`` is the architecture variant for stability."""

    vocab_size: int = 256
    block_size: int = 64  # tokens per sequence
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    qk_norm: bool = False
    init_std: float = 0.02

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


@dataclass
class Stats:
    """What one instrumented forward pass saw (0-d / 1-d detached tensors)."""

    attn_logit_max: Tensor  # max over layers, heads, and causal (query, key) pairs
    act_norms: Tensor  # (n_layer,) mean L2 norm of the residual stream after each block
    logz: Tensor  # mean over tokens of logsumexp(output logits)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.hs = cfg.n_head, cfg.head_size
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        # QK-layernorm (Dehghani et al. 2023; Wortsman et al. 2023): normalizing q and k
        # stops the attention logits from growing with the weights.
        self.q_norm = nn.LayerNorm(self.hs) if cfg.qk_norm else None
        self.k_norm = nn.LayerNorm(self.hs) if cfg.qk_norm else None
        mask = torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool).triu(1)
        self.register_buffer("future", mask, persistent=False)  # True above the diagonal

    def forward(
        self, x: Tensor, instrument: bool, fp16: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, self.hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, self.hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.hs).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        # Explicit attention (not a fused kernel): the logits are what we watch.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))  # (B, nh, T, T)
        if fp16:
            # fp16's range: a score past 65504 is inf, and its softmax row NaN
            att = torch.where(att.abs() > FP16_MAX, att.sign() * math.inf, att)
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        logit_max = att.detach().amax() if instrument else None
        y = F.softmax(att, dim=-1) @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y), logit_max


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.out = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)

    def forward(
        self, x: Tensor, instrument: bool, fp16: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        a, logit_max = self.attn(self.ln1(x), instrument, fp16)
        x = x + a
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x, logit_max


class GPT(nn.Module):
    """Token + position embeddings, pre-norm blocks, final LayerNorm, untied head."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd {cfg.n_embd} is not a multiple of n_head {cfg.n_head}")
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init)
        # GPT-2's scaled init of the residual projections, so depth does not grow the stream.
        for name, p in self.named_parameters():
            if name.endswith(("proj.weight", "out.weight")):
                nn.init.normal_(p, 0.0, cfg.init_std / math.sqrt(2 * cfg.n_layer))

    def _init(self, m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, 0.0, self.cfg.init_std)

    def forward(
        self,
        idx: Tensor,
        targets: Tensor,
        *,
        z_loss: float = 0.0,
        instrument: bool = False,
        fp16: bool = False,
    ) -> tuple[Tensor, Tensor, Stats | None]:
        """Return (objective, cross-entropy in nats, stats or None).

        The objective is the cross-entropy plus ``z_loss * mean(log Z ** 2)``. ``fp16``:
        the attention scores take fp16's range (see :class:`Attention`).
        """
        B, T = idx.shape
        x = self.wte(idx) + self.wpe.weight[:T]  # (B, T, C)
        logit_maxes, norms = [], []
        for block in self.blocks:
            x, logit_max = block(x, instrument, fp16)
            if instrument:
                logit_maxes.append(logit_max)
                norms.append(x.detach().norm(dim=-1).mean())
        logits = self.head(self.ln_f(x))  # (B, T, V)
        logz = torch.logsumexp(logits, dim=-1)  # (B, T)
        picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        ce = (logz - picked).mean()
        objective = ce + z_loss * logz.pow(2).mean() if z_loss else ce
        stats = None
        if instrument:
            stats = Stats(
                attn_logit_max=torch.stack(logit_maxes).amax(),
                act_norms=torch.stack(norms),
                logz=logz.detach().mean(),
            )
        return objective, ce, stats


@torch.no_grad()
def param_norm(params: list[Tensor]) -> Tensor:
    """Global L2 norm of the parameters (a 0-d tensor)."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(params)))
