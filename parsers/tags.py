"""TensorBoard tag names -> logbook columns, and which tags are evaluations.

A tag maps to a canonical column when its meaning is not in doubt (``train/loss``,
``lm loss``, ``train/learning_rate``, ``grad-norm``...). When several tags of a run
map to one column, the first in ``ALIASES`` order takes it and the others keep their
own names. A detector's metric under another namespace (``model/act_norm``) takes its
canonical column when the shared alias table knows it and no other tag has it. Every
other tag keeps its name in snake_case, without a ``train/`` namespace (``train/epoch``
-> ``epoch``, ``optim/beta`` -> ``optim_beta``). Tags whose
words include ``eval``, ``val``, ``valid``, ``validation`` or ``test`` are evaluations:
they become ``validation`` events, not metric columns. Megatron's ``<name> vs samples``
and ``vs tokens`` tags repeat the per-iteration tags against another x-axis; they are
counted as ignored.
"""

from __future__ import annotations

import re

from parsers.columns import snake
from parsers.reader import aliases

ALIASES: dict[str, tuple[str, ...]] = {
    "loss": (
        "loss", "train/loss", "train_loss", "training/loss", "loss/train", "train/lm_loss",
        "lm loss", "lm_loss", "loss_metrics/global_avg_loss", "train/loss_step",
        "train_loss_step", "loss_step",
    ),
    "lr": (
        "lr", "learning_rate", "train/learning_rate", "train/lr", "learning-rate",
        "optim/lr", "lr-adamw", "lr-adam", "lr-sgd",
    ),
    "grad_norm": (
        "grad_norm", "train/grad_norm", "grad-norm", "gradient_norm", "optim/grad_norm",
        "train/gradient_norm",
    ),
    "loss_scale": ("loss_scale", "loss-scale", "train/loss_scale"),
    "tokens": ("tokens", "train/num_input_tokens_seen", "ntokens_seen", "consumed_tokens"),
    "samples": ("samples", "consumed_samples", "consumed-samples"),
    "batch_size": ("batch_size", "batch-size", "train/batch_size"),
    "step_time_s": ("iteration-time", "time_metrics/end_to_end(s)", "step_time_s"),
    "param_norm": ("params-norm", "param_norm", "params_norm"),
    "skipped": ("skipped-iterations", "skipped_iterations"),
    "nan_count": ("nan-iterations", "nan_iterations"),
}  # fmt: skip
INTEGER = ("tokens", "samples", "batch_size", "skipped", "nan_count")
EVAL_WORDS = ("eval", "val", "valid", "validation", "test", "evaluation")
RESERVED = ("step", "time", "line", "segment", "source")
_OTHER_AXIS = re.compile(r" vs (samples|tokens)$")
_NAMESPACE = re.compile(r"^(train|training)/", re.IGNORECASE)  # adds nothing to a name

MAPS = (
    ", ".join(f"{'|'.join(keys)}->{col}" for col, keys in ALIASES.items())
    + "; tags with an eval/val/validation/test word -> validation events; other tags kept"
    " as snake_case columns; wall_time->time"
)


def other_axis(tag: str) -> bool:
    """A Megatron ``... vs samples`` tag: the same values against samples or tokens."""
    return bool(_OTHER_AXIS.search(tag))


def words(tag: str) -> list[str]:
    return [w for w in re.split(r"[^0-9a-z]+", tag.lower()) if w]


def eval_split(tag: str) -> str | None:
    """The evaluation word of a tag (``eval/loss`` -> ``eval``), or None."""
    return next((w for w in words(tag) if w in EVAL_WORDS), None)


def eval_key(tag: str, split: str) -> str:
    """The value's name inside its validation event: the tag without its split word."""
    rest = [w for w in words(tag) if w != split]
    return "_".join(rest) or "value"


def _alias_key(tag: str) -> str:
    return tag.strip().lower()


_LOOKUP = {_alias_key(a): (col, rank) for col, keys in ALIASES.items() for rank, a in
           enumerate(keys)}  # fmt: skip


def columns(tags: list[str]) -> dict[str, str]:
    """Column name for each training tag: canonical where unambiguous, else snake_case
    (a name that would clash gets ``_value``, then a number)."""
    best: dict[str, tuple[int, str]] = {}
    for tag in tags:
        hit = _LOOKUP.get(_alias_key(tag))
        if hit and (hit[0] not in best or hit[1] < best[hit[0]][0]):
            best[hit[0]] = (hit[1], tag)
    out = {tag: col for col, (_, tag) in best.items()}
    monitors = [t for t in tags if t.lower().startswith("lr-")]  # Lightning's lr-<Optimizer>
    if "lr" not in out.values() and len(monitors) == 1:
        out[monitors[0]] = "lr"
    taken = set(out.values())
    for tag in tags:  # the detectors' metrics under another namespace (``model/act_norm``)
        canon = aliases.detector_column(tag)
        if tag not in out and canon is not None and canon not in taken:
            out[tag] = canon
            taken.add(canon)
    for tag in tags:
        if tag in out:
            continue
        name = snake(_NAMESPACE.sub("", tag) or tag)
        if name in RESERVED or name in ALIASES or name in taken:
            name = f"{name}_value"
        base, k = name, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        out[tag] = name
        taken.add(name)
    return out
