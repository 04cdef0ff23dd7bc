"""The engine's step log and its conversion to a ``logbook.run.Run`` (schema logbook/1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from logbook.run import Run, RunMeta
from logbook.schema import (
    ConfigChange,
    DataSkip,
    EventBase,
    LossScaleChange,
    LrChange,
    OverflowSkip,
)

if TYPE_CHECKING:
    from replay.engine import Trainer

# Order of the values the engine stacks per step (then one act norm per layer).
_VALUES = ("loss", "grad_norm", "param_norm", "attn_logit_max", "logz")
# Metrics that are not a function of the training state: never compared by verify.
WALL_CLOCK = ("step_time_s", "time")


class StepLog:
    """Rows appended per step; turned into a polars frame once, at the end."""

    def __init__(self, n_layer: int) -> None:
        self.n_layer = n_layer
        self.rows: list[tuple] = []
        self.skipped_steps: list[tuple[int, int]] = []  # (segment, step) not trained

    def add(self, *, step, segment, lr, values, overflow, scale, seconds) -> None:
        if overflow:
            values[1] = None  # no gradient norm for a step whose gradients overflowed
        fp16 = scale is not None
        skipped = int(overflow) if fp16 else None
        self.rows.append((step, segment, lr, scale, skipped, seconds, *values))

    def skip(self, step: int, segment: int = 0) -> None:
        self.skipped_steps.append((segment, step))

    def columns(self) -> list[str]:
        """The names of the fields of a row, in order."""
        layers = [f"act_norm_layer{i}" for i in range(self.n_layer)]
        names = ["step", "segment", "lr", "loss_scale", "skipped", "step_time_s"]
        return [*names, *_VALUES, *layers]

    def frame(self, batch_size: int, block_size: int) -> pl.DataFrame:
        layers = [f"act_norm_layer{i}" for i in range(self.n_layer)]
        names = self.columns()
        schema = {n: pl.Float64 for n in names} | {
            "step": pl.Int64,
            "segment": pl.Int32,
            "skipped": pl.Int64,
        }
        df = pl.DataFrame(self.rows, schema=schema, orient="row")
        return df.with_columns(
            pl.col(layers[-1]).alias("act_norm"),
            (pl.col("step") * batch_size).alias("samples"),
            (pl.col("step") * batch_size * block_size).alias("tokens"),
            pl.lit(batch_size, dtype=pl.Int64).alias("batch_size"),
        )


def build_run(trainer: Trainer) -> Run:
    cfg = trainer.cfg
    df = trainer.log.frame(cfg.train.batch_size, cfg.model.block_size)
    events = list(trainer.events) + _skips(trainer) + _plan_events(trainer)
    if trainer.scaler is not None:
        events += _scale_events(df, cfg.train.init_scale)
    meta = RunMeta(name=trainer.name, format="replay")
    extra = {"config": cfg.to_dict(), "plan": trainer.plan.to_list()}
    meta = RunMeta.model_validate(meta.model_dump() | {"replay": extra})
    return Run(metrics=df, events=events, meta=meta)


def _skips(trainer: Trainer) -> list[EventBase]:
    """One ``data_skip`` event per contiguous range of skipped steps."""
    out: list[EventBase] = []
    for seg, step in trainer.log.skipped_steps:
        last = out[-1] if out else None
        if last is not None and last.segment == seg and last.end_step == step - 1:
            last.end_step = step
            continue
        out.append(DataSkip(step=step, segment=seg, start_step=step, end_step=step))
    return out


def _plan_events(trainer: Trainer) -> list[EventBase]:
    """Each step-bound intervention as the event a real log would show."""
    out: list[EventBase] = []
    cfg = trainer.cfg.train
    for i in trainer.plan.items:
        if i.start is None or i.kind in ("skip", "qk_norm") or i.start > trainer.step:
            continue
        seg = i.segment or 0
        if i.kind == "lr_scale":
            before = trainer.schedule(i.start) * trainer.plan.lr_factor(i.start - 1, seg)
            ev = LrChange(step=i.start, old=before, new=before * i.value, manual=True)
        elif i.kind == "reset_opt":
            ev = ConfigChange(step=i.start, key="optimizer_state", old="kept", new="reset")
        elif i.kind == "bf16":
            old = "fp16" if cfg.fp16 else "fp32"
            ev = ConfigChange(step=i.start, key="precision", old=old, new="bf16")
        else:
            default = {
                "clip": cfg.clip, "z_loss": cfg.z_loss, "data_seed": cfg.seed,
                "beta2": cfg.beta2, "eps": cfg.eps,
            }[i.kind]  # fmt: skip
            old = getattr(trainer.plan, i.kind)(i.start - 1, default, seg)
            ev = ConfigChange(step=i.start, key=i.kind, old=float(old), new=float(i.value))
        ev.segment = i.segment if i.segment is not None else _segment_at(trainer, i.start)
        out.append(ev)
    return out


def _segment_at(trainer: Trainer, step: int) -> int:
    for s, seg in ((r[0], r[1]) for r in trainer.log.rows):
        if s >= step:
            return seg
    return trainer.segment


def _scale_events(df: pl.DataFrame, init_scale: float) -> list[EventBase]:
    """Overflow skips and loss-scale changes, read off the fp16 columns."""
    prev = pl.col("loss_scale").shift(1, fill_value=init_scale)
    rows = df.select("step", "segment", "skipped", "loss_scale", prev.alias("old")).filter(
        (pl.col("skipped") > 0) | (prev.is_not_null() & (prev != pl.col("loss_scale")))
    )
    out: list[EventBase] = []
    for step, seg, skipped, scale, old in rows.iter_rows():
        if skipped:
            out.append(OverflowSkip(step=step, segment=seg, attempted_scale=old, new_scale=scale))
        if old is not None and old != scale:
            out.append(LossScaleChange(step=step, segment=seg, old=old, new=scale))
    return out
