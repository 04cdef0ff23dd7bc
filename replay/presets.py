"""Named recipes for ``replay record --preset``: a documented instability, or the healthy
default, on the real-text data.

Each preset is a set of config settings (applied over the defaults, under ``--config``
and the command-line options) and the counterfactual that the literature reports as its
fix, with the checkpoint to run it from: ``logbook replay counterfactual RUN --from
FROM --variant fix=FIX``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logbook.errors import UsageError


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    settings: dict[str, dict] = field(default_factory=dict)
    fix: str = "baseline"  # the reported fix, as an intervention spec
    fix_from: int = 0  # the checkpoint step the fix is tried from
    checkpoint_every: int = 50

    def apply(self, config: dict) -> dict:
        """``config`` (a ``ReplayConfig.to_dict()``) with this preset's settings over it."""
        return {k: {**v, **self.settings.get(k, {})} for k, v in config.items()}


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "healthy",
            "the defaults: real text, peak LR 2e-3, 300 steps; no warning finding",
        ),
        Preset(
            "data-spike",
            "five batches of repeated tokens at steps 200-204, from a trained state (loss "
            "about 2.4 nats, from 5.5): the loss spikes on them and stays raised after; "
            "the fix is PaLM's and OPT's: rewind and skip those batches",
            {"data": {"bad_from": 200, "bad_steps": 5, "bad_kind": "repeat"}},
            fix="skip:200-204",
            fix_from=150,
        ),
        Preset(
            "fp16-attn-logits",
            "fp16 with a dynamic loss scale at a high LR (warm-up to 0.3 over 200 steps, "
            "then constant): the attention logits grow past fp16's range (65504) from a "
            "trained state (loss about 3.2, from 5.5), the loss turns NaN and the loss "
            "scale collapses to its minimum; the fixes: bf16 from a checkpoint before "
            "(BLOOM), or QK-norm (Dehghani et al. 2023, Wortsman et al. 2023)",
            {
                "train": {
                    "fp16": True,
                    "lr": 0.3,
                    "warmup": 200,
                    "steps": 300,
                    "min_lr_ratio": 1.0,
                }
            },
            fix="bf16",
            fix_from=150,
            checkpoint_every=25,
        ),
        Preset(
            "adam-second-moment",
            "from step 100 the batches are two of one tiny dataset, over and over (a "
            "fine-tune on a few examples): the model learns them by heart, the loss falls "
            "to ~0.03 (from 5.5), the gradients shrink, Adam's second-moment estimate "
            "decays by beta2 each step until the updates it scales blow up and the loss "
            "spikes x5-x15, again and again (Molybog et al. 2023; the slingshot of Thilak "
            "et al. 2022); measured fix: a beta2 nearer 1 (0.999: the estimate decays "
            "~50x slower) with half the LR; either alone only delays it",
            {
                "data": {"pool_from": 100, "pool_size": 2},
                "train": {"steps": 500, "min_lr_ratio": 1.0},
            },
            fix="beta2:0.999,lr_scale:0.5",
            fix_from=250,
        ),
    )
}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"--preset {name!r}: unknown; one of {', '.join(PRESETS)}") from None
