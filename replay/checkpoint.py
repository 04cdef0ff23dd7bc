"""Checkpoints: the full training state in memory and on disk.

A checkpoint holds the model, the optimizer (Adam moments and step counts), the LR
schedule, the loss scaler, the RNG states, the data position, the config and the
interventions in force. In memory it is a tree of tensors that no live trainer shares:
:func:`snapshot` copies the trainer's tensors out and :func:`restore` copies them back in
(``Optimizer.load_state_dict`` keeps references to the tensors it is given, so restoring
twice from one snapshot without copying would let the first replay modify the second).

On disk a run directory holds ``checkpoints/step_NNNNNNNN.pt`` (``torch.save`` bytes,
written to a temp file then renamed) and ``checkpoints/index.json`` with each file's
SHA-256, checked on load.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import torch

from logbook.atomic import atomic_open
from logbook.errors import InputError
from logbook.schema import CheckpointSave
from replay.config import ReplayConfig
from replay.engine import Trainer
from replay.interventions import Plan

FORMAT = "logbook-replay-checkpoint/1"
INDEX = "index.json"


def clone_tree(tree):
    """A deep copy of nested dicts/lists/tuples whose tensors are fresh copies."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {k: clone_tree(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(clone_tree(v) for v in tree)
    return tree


def snapshot(trainer: Trainer) -> dict:
    """The trainer's full state as an independent in-memory checkpoint."""
    return clone_tree(trainer.state_dict())


def restore(trainer: Trainer, state: dict) -> None:
    """Load a checkpoint into a trainer built with the same config; ``state`` stays
    untouched, so it can be restored again."""
    trainer.load_state_dict(clone_tree(state))
    trainer.segment = int(state["segment"])


def trainer_from(state: dict, plan: Plan | None = None, name: str | None = None) -> Trainer:
    """A trainer resumed from a checkpoint: its own config, and its recorded plan unless
    ``plan`` replaces it."""
    cfg = ReplayConfig.from_dict(state["config"])
    trainer = Trainer(cfg, plan if plan is not None else Plan.from_list(state["plan"]), name)
    restore(trainer, state)
    return trainer


def to_bytes(state: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def from_bytes(data: bytes, name: str = "checkpoint") -> dict:
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for damaged archives
        raise InputError(f"{name}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InputError(f"{name}: not a logbook replay checkpoint")
    return state


class _BadEntry(ValueError):
    pass


_HEX = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^step_\d{1,19}\.pt$")


def _entry(e: dict) -> dict:
    """One index entry checked: a step, a file named as :meth:`CheckpointDir.save`
    names them (a plain name inside the checkpoint folder: never a path that leads out
    of it) and a SHA-256 hash."""
    step, name, digest = e["step"], e.get("file"), e.get("sha256")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 2**63:
        raise _BadEntry(f"step {step!r} is not a step number")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _BadEntry(f"file {name!r} is not a checkpoint file of this folder")
    if not isinstance(digest, str) or not _HEX.match(digest):
        raise _BadEntry(f"entry of step {step} has no sha256 hash")
    return e


class CheckpointDir:
    """The checkpoints of one recorded run, under ``root/checkpoints``."""

    def __init__(self, root: str | Path) -> None:
        self.dir = Path(root) / "checkpoints"

    def _index(self) -> dict[int, dict]:
        path = self.dir / INDEX
        if not path.exists():
            return {}
        try:
            entries = json.loads(path.read_text())["checkpoints"]
            return {int(e["step"]): _entry(e) for e in entries}
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
            why = f": {exc}" if isinstance(exc, _BadEntry) else ""
            raise InputError(f"{path}: damaged checkpoint index{why}") from None

    def steps(self) -> list[int]:
        return sorted(self._index())

    def save(self, state: dict) -> CheckpointSave:
        """Write one checkpoint atomically and record its hash; return the event."""
        import time

        t0 = time.perf_counter()
        data = to_bytes(state)
        step = int(state["step"])
        name = f"step_{step:08d}.pt"
        with atomic_open(self.dir / name, "wb") as fh:
            fh.write(data)
        index = self._index()
        index[step] = {"step": step, "file": name, "sha256": hashlib.sha256(data).hexdigest()}
        body = {"checkpoints": [index[s] for s in sorted(index)]}
        with atomic_open(self.dir / INDEX, "w") as fh:
            fh.write(json.dumps(body, indent=1) + "\n")
        return CheckpointSave(
            step=step,
            segment=int(state["segment"]),
            path=f"checkpoints/{name}",
            save_time_s=round(time.perf_counter() - t0, 6),
        )

    def load(self, step: int) -> dict:
        """The checkpoint saved after ``step``, its hash checked."""
        index = self._index()
        if step not in index:
            have = ", ".join(map(str, sorted(index))) or "none"
            raise InputError(f"{self.dir}: no checkpoint at step {step} (have: {have})")
        entry = index[step]
        path = self.dir / entry["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise InputError(f"{path}: content hash does not match the index (damaged file)")
        return from_bytes(data, str(path))
