"""Record a run (its logbook JSONL plus checkpoints) and verify a replay against it.

A run directory holds ``run.jsonl`` (schema logbook/1, readable by ``logbook detect``)
and ``checkpoints/`` (see ``replay.checkpoint``). The checkpoint at step 0 (the initial
state) is always written, then one every ``checkpoint_every`` steps and one at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from logbook.atomic import atomic_open
from logbook.errors import InputError, UsageError
from logbook.run import Run
from replay import environment
from replay._runlog import WALL_CLOCK
from replay.checkpoint import CheckpointDir, trainer_from
from replay.config import ReplayConfig
from replay.engine import Trainer
from replay.interventions import Plan

RUN_FILE = "run.jsonl"
_NOT_COMPARED = {*WALL_CLOCK, "line", "source"}


SETTINGS_FILE = "recording.json"


def record(
    cfg: ReplayConfig,
    out: str | Path,
    checkpoint_every: int = 0,
    name: str | None = None,
    preset: str | None = None,
) -> Run:
    """Train from scratch for ``cfg.train.steps`` steps, writing checkpoints and the run
    (``preset``: the name of the preset the config came from, kept in the settings).

    ``run.jsonl`` is rewritten (atomically) after every checkpoint, so an interrupted
    recording holds the run up to its last checkpoint and :func:`resume` continues it."""
    if checkpoint_every < 0:
        raise UsageError("--checkpoint-every must be >= 0")
    root = Path(out)
    name = name or root.name
    trainer = Trainer(cfg, Plan(), name=name)  # (sets the threads the settings record)
    with atomic_open(root / SETTINGS_FILE, "w") as fh:
        settings = {
            "checkpoint_every": checkpoint_every,
            "name": name,
            "config": cfg.to_dict(),
            "environment": environment.current(cfg.train.device, trainer.data.fingerprint),
        }
        if preset is not None:
            settings["preset"] = preset
        fh.write(json.dumps(settings) + "\n")
    return _train(trainer, root, checkpoint_every)


def recorded_environment(root: str | Path) -> dict | None:
    """The settings a recording was made with (None: not kept, or no settings file)."""
    try:
        env = json.loads((Path(root) / SETTINGS_FILE).read_text()).get("environment")
    except (OSError, ValueError, AttributeError):
        return None
    return env if isinstance(env, dict) else None


def resume(out: str | Path) -> tuple[Run, int]:
    """Continue an interrupted recording from its last checkpoint that ``run.jsonl``
    reaches; the finished run is the one an uninterrupted recording gives, bit for bit
    (wall-clock columns aside). Returns the run and the step it resumed from."""
    root = Path(out)
    try:
        settings = json.loads((root / SETTINGS_FILE).read_text())
        every, name = int(settings["checkpoint_every"]), str(settings["name"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{root}: not a recording that can be resumed ({SETTINGS_FILE})") from None
    ckpts = CheckpointDir(root)
    have = ckpts.steps()
    if not have:  # stopped before its first checkpoint: record it from the start
        if not isinstance(settings.get("config"), dict):
            raise InputError(f"{root}: no checkpoint to resume from, and no config to start")
        cfg = ReplayConfig.from_dict(settings["config"]).check()
        return _train(Trainer(cfg, Plan(), name=name), root, every), 0
    logged = Run.read(root / RUN_FILE) if (root / RUN_FILE).exists() else None
    last_row = int(logged.metrics.get_column("step").max() or 0) if logged else 0
    start = max((s for s in have if s <= last_row), default=have[0])
    trainer = trainer_from(ckpts.load(start), Plan(), name=name)
    if trainer.step >= trainer.cfg.train.steps and logged is not None and last_row >= start:
        return logged, start  # (finished already)
    if logged is not None:
        _restore_log(trainer, logged, start)
    return _train(trainer, root, every, resumed=True), start


def _train(trainer: Trainer, root: Path, checkpoint_every: int, resumed: bool = False) -> Run:
    ckpts = CheckpointDir(root)
    last = trainer.cfg.train.steps

    def save(tr: Trainer) -> None:
        every = checkpoint_every and tr.step % checkpoint_every == 0
        if tr.step == 0 or every or tr.step == last:
            tr.events.append(ckpts.save(tr.state_dict()))
            if tr.step != last:
                tr.to_run().write(root / RUN_FILE)

    if not resumed:
        save(trainer)
    trainer.run(last, on_step=save)
    run = trainer.to_run()
    run.write(root / RUN_FILE)
    return run


def _restore_log(trainer: Trainer, logged: Run, upto: int) -> None:
    """The step rows and events of ``logged`` up to step ``upto``, back in the trainer
    (a recording has one segment and no plan: nothing else to restore)."""
    names = trainer.log.columns()
    rows = logged.metrics.filter(pl.col("step") <= upto).select(names).rows()
    trainer.log.rows = [tuple(r) for r in rows]
    trainer.events = [e for e in logged.events if e.kind == "checkpoint_save" and e.step <= upto]


@dataclass
class Difference:
    """The first place where a replay departs from the recording."""

    step: int
    metric: str
    recorded: float | int | None
    replayed: float | int | None

    def __str__(self) -> str:
        return (
            f"first difference at step {self.step}: {self.metric} recorded "
            f"{_show(self.recorded)}, replayed {_show(self.replayed)}"
        )


@dataclass
class VerifyResult:
    first: Difference | None
    steps: tuple[int, int]  # compared range, inclusive
    metrics: list[str]
    rows: int
    # settings that differ from the recording's (``field: recorded -> here``)
    environment: list[str] = field(default_factory=list)


def read_recording(root: str | Path) -> Run:
    path = Path(root) / RUN_FILE
    if not path.exists():
        raise InputError(f"{root}: no recorded run here (expected {RUN_FILE})")
    return Run.read(path)


def verify(
    root: str | Path, from_step: int, until: int | None = None, change: Plan | None = None
) -> VerifyResult:
    """Replay from the checkpoint at ``from_step`` (with ``change`` applied from the next
    step, to show what a departure looks like) and compare every reproducible metric of
    every step with the recording, bit for bit."""
    recorded = read_recording(root)
    state = CheckpointDir(root).load(from_step)
    last_recorded = recorded.metrics.get_column("step").max()
    last = last_recorded if until is None else until
    if last is None or last <= from_step:
        raise UsageError(f"nothing to verify after step {from_step} (last step {last})")
    if last > last_recorded:
        raise UsageError(f"--until {last}: the recording ends at step {last_recorded}")
    plan = Plan.from_list(state["plan"])
    if change is not None:
        plan = Plan(plan.items + change.resolved(from_step + 1).items)
        if change.qk_norm:
            raise UsageError("qk_norm changes the architecture: it cannot apply from a checkpoint")
    trainer = trainer_from(state, plan)
    here = environment.current(trainer.cfg.train.device, trainer.data.fingerprint)
    trainer.run(last)
    result = compare(recorded, trainer.to_run(), from_step, last)
    result.environment = environment.differences(recorded_environment(root), here)
    return result


def compare(recorded: Run, replayed: Run, from_step: int, last: int) -> VerifyResult:
    """Bitwise comparison of two runs' metrics over steps ``from_step+1 .. last``."""
    window = (pl.col("step") > from_step) & (pl.col("step") <= last)
    a = recorded.metrics.filter(window)
    b = replayed.metrics.filter(window)
    cols = [c for c in a.columns if c not in _NOT_COMPARED]
    cols += [c for c in b.columns if c not in _NOT_COMPARED and c not in cols]
    a = _with_columns(a, cols).with_columns(pl.lit(True).alias("_here"))
    b = _with_columns(b, cols).with_columns(pl.lit(True).alias("_here"))
    joined = a.join(b, on="step", how="full", suffix="_r", coalesce=True, maintain_order="left")
    joined = joined.sort("step")
    steps = joined.get_column("step").to_numpy()
    first: Difference | None = None
    first_row = len(steps)
    here = ~_same_bits(joined.get_column("_here"), joined.get_column("_here_r"))
    if here.any():
        i = int(np.argmax(here))
        first_row = i
        rec, rep = (joined.get_column(c)[i] is not None for c in ("_here", "_here_r"))
        first = Difference(int(steps[i]), "record", _presence(rec), _presence(rep))
    for c in (c for c in cols if c != "step"):
        x, y = joined.get_column(c), joined.get_column(c + "_r")
        bad = ~_same_bits(x, y)
        if bad.any():
            i = int(np.argmax(bad))
            if i < first_row:
                first_row = i
                first = Difference(int(steps[i]), c, x[i], y[i])
    return VerifyResult(first, (from_step + 1, last), [c for c in cols if c != "step"], len(steps))


def _with_columns(df: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    missing = [pl.lit(None, dtype=pl.Float64).alias(c) for c in cols if c not in df.columns]
    return df.with_columns(missing).select(cols)


def _same_bits(x: pl.Series, y: pl.Series) -> np.ndarray:
    """Elementwise: both null, or the same value bit for bit (NaN payloads included)."""
    xn, yn = x.is_null().to_numpy(), y.is_null().to_numpy()
    if x.dtype.is_float() or y.dtype.is_float():
        xv = x.cast(pl.Float64).fill_null(0.0).to_numpy().view(np.int64)
        yv = y.cast(pl.Float64).fill_null(0.0).to_numpy().view(np.int64)
    else:
        xv = x.cast(pl.Int64).fill_null(0).to_numpy()
        yv = y.cast(pl.Int64).fill_null(0).to_numpy()
    return (xn & yn) | (~xn & ~yn & (xv == yv))


def _presence(here: bool) -> str:
    return "present" if here else "absent"


def _show(v) -> str:
    if isinstance(v, str):
        return v
    return "null" if v is None else repr(v)
