"""The one alias table: metric keys as frameworks print them -> canonical columns.

Keys are compared normalized (:func:`norm`): lower case, every run of characters other
than letters and digits made one ``_``, so ``lm loss``, ``lm_loss`` and ``LM-Loss`` are
one key. A namespaced key (``train/loss``, ``trainer/global_step``, ``optim/lr``) is
also tried without its namespace. A framework adds its own keys on top (its
``ALIASES``), which win over these.
"""

from __future__ import annotations

import re

STEP = "step"

ALIASES: dict[str, str] = {
    # the training step
    "step": STEP,
    "steps": STEP,
    "iter": STEP,
    "iters": STEP,
    "iteration": STEP,
    "it": STEP,
    "i": STEP,  # torch-rnn: ``Epoch 1.00 / 100, i = 10 / 672300, loss = 0.099``
    "global_step": STEP,
    "globalstep": STEP,
    "global_batch_idx": STEP,  # icefall's and ZipVoice's count over the epochs
    "current_steps": STEP,  # LLaMA-Factory's trainer_log.jsonl
    "num_updates": STEP,
    "update": STEP,
    "updates": STEP,
    "tick": STEP,  # StyleGAN's ``tick 1  kimg 4.0  time 1m 02s``
    "total_train_updates": STEP,  # ParlAI (its ``updates``: the interval's count)
    # RL: the environment steps so far (Stable-Baselines3's ``time/total_timesteps``,
    # baselines' ``misc/total_timesteps`` and PPO1's ``TimestepsSoFar``)
    "time_total_timesteps": STEP,
    "misc_total_timesteps": STEP,
    "total_timesteps": STEP,
    "env_step": STEP,  # Tianshou's bar postfix: environment steps over the epochs
    "timesteps_so_far": STEP,
    "timestepssofar": STEP,
    "train_step": STEP,
    "training_iteration": STEP,
    "iter_train": STEP,
    "completed_step": STEP,  # MaxText
    # MaxText's step at a profiler's start or stop, its time left out
    "completed_profiler_activation_deactivation_step": STEP,
    "current_step": STEP,
    "cur_step": STEP,
    "curr_step": STEP,
    "training_step": STEP,
    "optimizer_step": STEP,
    "opt_step": STEP,
    "global_iter": STEP,
    "total_iter": STEP,  # PaddleSlim demos: ``Total iter: 10, epoch: 0, batch: 10``
    "global_iteration": STEP,
    "n_iter": STEP,
    "step_train": STEP,
    "step_i": STEP,  # paxml: ``[PAX STATUS] step_i: 100, training loss: 6.52``
    "up": STEP,  # Marian: ``Ep. 1 : Up. 14000 : Sen. 965,843 : Cost 5.20174599``
    # losses
    "loss": "loss",
    "loss_train": "loss",  # LitGPT: ``loss train: 2.846, val: 2.861``
    "loss_train_curr": "loss",  # LitGPT 2024: ``loss train (curr): 1.657``
    "lm_loss": "loss",
    "global_avg_loss": "loss",  # torchtitan's descendants: ``global_avg_loss=11.10``
    "loss_is": "loss",  # MindSpore's LossMonitor: ``epoch: 1 step: 100, loss is 2.3456``
    "train_loss": "loss",
    "train_epoch_loss": "loss",  # PEFT's examples: the epoch's mean training loss
    "training_loss": "loss",
    "reduced_train_loss": "loss",
    "train_loss_step": "loss",
    "train_lm_loss": "loss",
    "total_loss": "loss",
    "crossentropyloss": "loss",
    "train_crossentropyloss": "loss",
    "cross_entropy_loss": "loss",  # ``cross-entropy-loss``, ``Cross Entropy Loss``
    "cross_entropy": "loss",
    "crossentropy": "loss",
    "cross_entropy_train": "loss",
    "ce": "loss",  # ``ce: 2.31``, ``train/ce``
    "xent_loss": "loss",
    "ce_loss": "loss",
    "xent": "loss",  # OpenNMT-py (cross-entropy per token)
    "trl": "loss",  # llm.c's main.log: ``trl`` train loss (``tel`` is its eval loss)
    "train_ce_loss": "loss",
    "loss_step": "loss",
    "step_loss": "loss",
    "avg_loss": "loss",
    "cost": "loss",  # Marian's ``Cost``; TensorFlow-era scripts' ``cost``
    # gradient boosting: the training set's log loss, per boosting round (XGBoost's
    # ``[500]\teval-logloss:0.419\ttrain-logloss:0.160``; LightGBM's ``[2]\ttraining's
    # binary_logloss: 0.732``)
    "train_logloss": "loss",
    "train_mlogloss": "loss",
    "training_s_binary_logloss": "loss",
    "training_s_multi_logloss": "loss",
    "training_binary_logloss": "loss",
    "training_multi_logloss": "loss",
    # learning rate
    "lr": "lr",
    "learning_rate": "lr",
    "learningrate": "lr",
    "l_r": "lr",  # Marian: ``L.r. 3.0000e-04``
    "lr_0": "lr",
    "lr_group0": "lr",
    "lr_group_0": "lr",
    "optim_lr_group_0": "lr",
    "base_lr": "lr",
    "optim_lr": "lr",
    "lr_default": "lr",
    # norms
    "grad_norm": "grad_norm",
    "gradnorm": "grad_norm",
    "gnorm": "grad_norm",
    "norm": "grad_norm",  # build-nanogpt and llm.c: ``norm: 0.70`` is the gradient norm
    "total_grad_norm": "grad_norm",
    "optim_total_grad_norm": "grad_norm",
    "grad_norm_total": "grad_norm",
    "param_norm": "param_norm",
    "params_norm": "param_norm",
    "act_norm": "act_norm",
    "actv_norm": "act_norm",
    "activation_norm": "act_norm",
    "activations_norm": "act_norm",
    "attn_logit_max": "attn_logit_max",
    "max_attn_logit": "attn_logit_max",
    "attn_logits_max": "attn_logit_max",
    "attention_logit_max": "attn_logit_max",
    "max_attention_logit": "attn_logit_max",
    "logz": "logz",
    "log_z": "logz",
    # fp16
    "loss_scale": "loss_scale",
    "lossscale": "loss_scale",
    "number_of_skipped_iterations": "skipped",
    "skipped": "skipped",
    "number_of_nan_iterations": "nan_count",
    # progress
    "consumed_samples": "samples",
    "consumed_tokens": "tokens",
    "tokens": "tokens",
    "trained_tokens": "tokens",
    "tokens_seen": "tokens",
    "global_batch_size": "batch_size",
    "batch_size": "batch_size",
    "bsz": "batch_size",
    # time per step (values in seconds after their unit is applied)
    "time": "step_time_s",
    "step_time": "step_time_s",
    "iter_time": "step_time_s",
    "iter_time_s": "step_time_s",
    "batch_time": "step_time_s",
    "time_per_step": "step_time_s",
    "train_step_time": "step_time_s",
    "train_step_timing": "step_time_s",
    "train_step_timing_in_s": "step_time_s",
    "elapsed_time_per_iteration_ms": "step_time_s",
    "elapsed_time_per_iteration_s": "step_time_s",
    "time_per_iteration_ms": "step_time_s",  # nanotron since 2025
    "step_time_s": "step_time_s",
    "seconds": "step_time_s",  # MaxText: ``completed step: 9, seconds: 5.667, ...``
    "step_time_seconds": "step_time_s",  # MaxText's ``perf/step_time_seconds``
    "perf_step_time_seconds": "step_time_s",
}
# columns whose values are times: a unit printed with them (ms, s) scales to seconds
TIME_COLUMNS = {"step_time_s"}
# columns held as integers
INT_COLUMNS = {"step", "skipped", "nan_count", "samples", "tokens", "batch_size", "epoch"}
# key suffixes that state the unit in the key itself
_KEY_UNITS = {"_ms": "ms", "_in_ms": "ms", "_s": "s", "_in_s": "s", "_sec": "s"}
NAMESPACES = (
    "train_",
    "training_",
    "trainer_",
    "optim_",
    "optimizer_",
    "metrics_",
    "model_",
    "stats_",
    "actor_",  # RLHF trainers (verl, OpenRLHF): the policy's own ``actor/grad_norm``, ``actor/lr``
    "policy_",
)


# the canonical columns the detectors read: the ones a key of another format's own
# naming (a JSONL key, a TensorBoard tag) may still reach through this table
DETECTOR_COLUMNS = (
    "loss",
    "lr",
    "grad_norm",
    "loss_scale",
    "act_norm",
    "param_norm",
    "attn_logit_max",
    "logz",
)


def norm(key: str) -> str:
    """A key as the table spells it."""
    return re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_")


_DONE_STEP = re.compile(
    r"^(?:finished|completed|done|ended)_(?:training_|train_)?(?:step|iteration)$"
)
_LOSS_PER = re.compile(r"^(?:train(?:ing)?_)?loss_(?:per|over|for|of_last)_")


def canonical(key: str, extra: dict[str, str] | None = None) -> str | None:
    """The canonical column of a printed key, or None when it has none."""
    k = norm(key)
    for table in (extra or {}, ALIASES):
        if k in table:
            return table[k]
    for ns in NAMESPACES:
        if k.startswith(ns) and k[len(ns) :] in ALIASES:
            return ALIASES[k[len(ns) :]]
    if _LOSS_PER.match(k):  # ``Training loss per 100 training steps: 0.419``
        return "loss"
    if _DONE_STEP.match(k):  # Flax's examples: ``Finished training step 0. Loss: 10.97``
        return STEP
    return None


def detector_column(key: str) -> str | None:
    """The detector column (``DETECTOR_COLUMNS``) a key of another format's naming maps
    to in this table (``model/act_norm`` -> ``act_norm``), or None."""
    canon = canonical(key)
    return canon if canon in DETECTOR_COLUMNS else None


def key_unit(key: str) -> str:
    """The unit a key names itself (``elapsed time per iteration (ms)`` -> ``ms``)."""
    k = norm(key)
    for suffix, unit in _KEY_UNITS.items():
        if k.endswith(suffix):
            return unit
    return ""


def column_of(key: str) -> str:
    """A key without a canonical column as a column name of its own (snake_case)."""
    name = norm(re.sub(r"\([^)]*\)\s*$", "", key)) or "field"
    return f"{name}_field" if name in {"line", "segment", "source", "time", "type"} else name
