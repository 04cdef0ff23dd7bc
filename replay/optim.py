"""The optimizer side of the engine: AdamW groups, the LR schedule, the fp16 loss scaler.

The LR schedule is a pure function of the step (warm-up then cosine, or a recorded
series), so rewinding or skipping never desynchronizes it. The loss scaler emulates
fp16 dynamic loss scaling on fp32 hardware: the scaled gradients are rounded to fp16;
if any is out of fp16's range (or not finite) the step is skipped and the scale halved;
after ``window`` good steps in a row the scale doubles. That makes loss-scale collapse
reproducible on a CPU.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn


@dataclass(kw_only=True)
class Schedule:
    """LR at step ``k`` (1-based): linear warm-up to ``peak`` over ``warmup`` steps, then
    cosine decay to ``peak * min_ratio`` at ``total``; or, when ``series`` is given,
    ``series[k - series_start]`` (clamped to the ends of the series)."""

    peak: float
    warmup: int = 0
    total: int = 1
    min_ratio: float = 0.1
    series: list[float] | None = None
    series_start: int = 1

    def __call__(self, step: int) -> float:
        if self.series:
            i = min(max(step - self.series_start, 0), len(self.series) - 1)
            return self.series[i]
        if step <= self.warmup:
            return self.peak * step / self.warmup
        span = max(self.total - self.warmup, 1)
        progress = min((step - self.warmup) / span, 1.0)
        floor = self.peak * self.min_ratio
        return floor + (self.peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Schedule:
        return cls(**d)


@dataclass(kw_only=True)
class LossScaler:
    """fp16 dynamic loss scaling, emulated (see the module docstring)."""

    scale: float = 65536.0
    window: int = 200  # good steps in a row before the scale doubles
    min_scale: float = 1.0
    good_steps: int = 0
    _fp16_max: float = field(default=float(torch.finfo(torch.float16).max), repr=False)

    def unscale(self, grads: list[Tensor]) -> bool:
        """Round the scaled gradients to fp16 and unscale them in place; return True on
        overflow (then the caller skips the step) and update the scale either way."""
        halves = [g.to(torch.float16) for g in grads]
        peak = torch.stack([h.abs().amax() for h in halves]).amax()
        overflow = not bool(torch.isfinite(peak))
        if overflow:
            self.scale = max(self.scale / 2.0, self.min_scale)
            self.good_steps = 0
            return True
        inv = 1.0 / self.scale  # a power of two: exact
        for g, h in zip(grads, halves, strict=True):
            g.copy_(h).mul_(inv)
        self.good_steps += 1
        if self.good_steps >= self.window:
            self.scale *= 2.0
            self.good_steps = 0
        return False

    def state_dict(self) -> dict:
        return {"scale": self.scale, "window": self.window, "min_scale": self.min_scale,
                "good_steps": self.good_steps}  # fmt: skip

    def load_state_dict(self, d: dict) -> None:
        self.scale, self.window = float(d["scale"]), int(d["window"])
        self.min_scale, self.good_steps = float(d["min_scale"]), int(d["good_steps"])


def adamw(
    model: nn.Module, *, lr: float, weight_decay: float, betas: tuple[float, float], eps: float
) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on norms' gains or biases)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": other, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)


def grad_norm(grads: list[Tensor]) -> Tensor:
    """Global L2 norm of the gradients (a 0-d tensor)."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))


def clip_(grads: list[Tensor], norm: Tensor, max_norm: float) -> None:
    """Scale gradients down in place so their global norm is at most ``max_norm``."""
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coef)
