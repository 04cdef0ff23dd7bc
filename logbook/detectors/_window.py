"""Loss logged as a mean over a window of steps (Hugging Face Trainer's ``loss``).

A one-step jump of ratio r shows in a k-step mean as about 1 + (r - 1) / k, so the
ratio bars of the loss-spike detector are scaled the same way (unless the user set
them), and each loss finding says what per-step jump its logged jump implies.
"""

from __future__ import annotations

from logbook.detectors._base import DetectorConfig
from logbook.run import Run
from logbook.schema import Finding

RATIO_FIELDS = ("min_ratio", "single_record_ratio")
LOSS_KINDS = ("loss_spike", "divergence")


def window_steps(run: Run) -> int | None:
    """The averaging window of the run's loss, when the parser flagged one (k > 1)."""
    extra = run.meta.model_extra or {}
    k = extra.get("loss_window_steps")
    if extra.get("loss_window_averaged") and isinstance(k, int) and k > 1:
        return k
    return None


def scaled(cfg: DetectorConfig, k: int) -> DetectorConfig:
    """``cfg`` with its ratio bars scaled to a k-step mean, where left at the default."""
    changes = {}
    for name in RATIO_FIELDS:
        if name in cfg.model_fields_set or name not in type(cfg).model_fields:
            continue
        default = getattr(cfg, name)
        changes[name] = 1.0 + (default - 1.0) / k
    return cfg.model_copy(update=changes) if changes else cfg


def annotate(findings: list[Finding], k: int) -> None:
    """Say on each loss finding that the logged loss is a k-step mean."""
    for f in findings:
        if f.kind not in LOSS_KINDS:
            continue
        f.evidence["loss_window_steps"] = k
        ratio = f.evidence.get("ratio")
        if isinstance(ratio, int | float) and ratio > 1:
            per_step = 1.0 + (ratio - 1.0) * k
            f.evidence["per_step_ratio_at_least"] = per_step
            f.message += (
                f" (loss is a mean over {k} steps: one step alone would have jumped"
                f" {per_step:.3g}x)"
            )
        else:
            f.message += f" (loss is a mean over {k} steps)"
