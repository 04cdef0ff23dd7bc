"""Events in metaseq/fairseq logs, read from the (few) lines that are not records.

* ``NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: X``
  (older fairseq: ``WARNING: overflow detected, setting loss scale to: X``) ->
  ``overflow_skip``, plus ``loss_scale_change`` when X differs from the scale in force.
  The line has no step: both take the step of the next record, the first one logged
  after the skipped update (the record that shows the new scale).
* ``... ignoring gradient, Grad norm: G exceeds threshold: T, rejecting batch.`` (metaseq
  with ``--skip-gradient-update-on-clip-norm``) -> ``data_skip``: the batch is dropped
  without an update and without touching the loss scale, so it is not an fp16
  overflow; the step is the next record's, as above.
* ``Loaded checkpoint P (epoch E @ N updates)`` -> a ``restart`` launch marker with
  ``resume_step`` N; ``No existing checkpoint found`` -> a marker of a fresh launch
  (``resume_step`` 0). One of the two is logged once per launch.
* ``Saved checkpoint P (epoch E @ N updates...) (writing took S seconds)`` ->
  ``checkpoint_save``.
* ``Scaling LR by F to LR`` (metaseq scales the LR down after a loss spike) ->
  ``lr_change`` with ``manual`` true (not the schedule); the next record's step. LR is
  printed with 6 decimals, so ``0.000000`` leaves ``new`` unknown.
* ``Skipping batches starting from step N with K batches left to skip`` -> ``data_skip``
  of step N (one event per skipped batch, as logged).
* crash evidence (out of memory, ECC, NCCL timeouts and errors, CUDA errors, signals,
  Slurm cancellations, and as a last resort any Python traceback or exception line) ->
  ``hardware_failure`` with a short ``cause``; consecutive crash lines (no record or
  launch between) make one event, with the most specific cause found.
* the loss-scaler banner ``*** SCALE_WINDOW: W, loss scale: S ***`` is no event (the
  initial scale is no change) but sets the scale in force.
"""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np

from logbook.schema import (
    CheckpointSave,
    DataSkip,
    EventBase,
    HardwareFailure,
    LossScaleChange,
    LrChange,
    OverflowSkip,
    Restart,
    Source,
)

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"
_OVERFLOW = r"(?i:overflow detected)"
_REJECT = r"Grad norm: " + _NUM + r" exceeds threshold: " + _NUM
_NEW_SCALE = r"setting (?:loss )?scale to:?\s+(?:to\s+)?" + _NUM
_LOADED = r"(?i:loaded checkpoint (\S+) \(epoch (\d+) @ (\d{1,18}) updates)"
_FRESH = r"(?i:no existing checkpoint found)"
_SAVED = r"(?i:saved checkpoint (\S+) \(epoch (\d+) @ (\d{1,18}) updates)"
_SAVE_TIME = r"writing took " + _NUM + " seconds"
_LR_SCALE = r"Scaling LR by " + _NUM + " to " + _NUM
_SKIP = r"Skipping batches starting from step (\d{1,18})\b"
_BANNER = r"SCALE_WINDOW: \d+, loss scale: " + _NUM

EVENT_ANY = "|".join([_OVERFLOW, _LOADED, _FRESH, _SAVED, _LR_SCALE, _SKIP, _BANNER])

# Crash evidence, most specific first: a crash's cause is the first one found (the
# same names as the Megatron parser's).
CRASHES: list[tuple[str, str]] = [
    ("ecc", r"(?i:uncorrectable ECC|\bECC error|cudaErrorECCUncorrectable)"),
    ("bus_error", r"[Bb]us error|SIGBUS"),
    (
        "nccl_timeout",
        r"(?i:collective operation timeout|NCCL[^|]*\b(?:timed out|timeout)\b)",
    ),
    ("oom", r"(?i:out of memory|OutOfMemoryError|\bOOM:)"),
    (
        "nccl_error",
        r"(?i:NCCL (?:error|communicator was aborted)|nccl\w*Error|DistBackendError)",
    ),
    (
        "cuda_error",
        r"CUDA error|illegal memory access|device-side assert|unspecified launch failure",
    ),
    ("min_loss_scale", r"Minimum loss scale reached"),
    ("nonfinite", r"gradients are Nan/Inf"),
    ("segfault", r"Segmentation fault|SIGSEGV"),
    ("time_limit", r"DUE TO TIME LIMIT"),
    ("node_failure", r"DUE TO NODE FAIL"),
    ("preempted", r"DUE TO PREEMPTION"),
    ("cancelled", r"CANCELLED AT|Job step aborted"),
    ("sigkill", r"SIGKILL|[Ss]ignal 9\b"),
    ("sigterm", r"SIGTERM|[Ss]ignal 15\b|: Terminated$"),
    ("task_exit", r"srun: error: .*Exited with exit code|ChildFailedError"),
]
# What launchers put before a line: ``slurm_procid 0 : ``, ``3: `` (srun -l),
# ``[default3]:`` (torchrun).
PREFIX = r"^(?:\w+ \d+ : |\d+: |\[\w+\]:\s?)?"
# A Python traceback or exception line is crash evidence of last resort.
EXCEPTION = (
    PREFIX + r"(?:Traceback \(most recent call last\)"
    r"|(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt)(?::|\s*$)"
    r"|terminate called after throwing)"
)
CRASH_ANY = "|".join([p for _, p in CRASHES] + [EXCEPTION])
_CRASH_RE = [(cause, re.compile(p)) for cause, p in CRASHES] + [
    ("exception", re.compile(EXCEPTION))
]
_NODE = re.compile(r"srun: error: ([\w.-]+): task|\bON ([\w.-]+) CANCELLED AT")


def _f(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


class Records:
    """Where the file's records are, for the steps and scales of step-less lines."""

    def __init__(self, lines: np.ndarray, steps: np.ndarray, scales: np.ndarray) -> None:
        self.lines, self.steps, self.scales = lines, steps, scales  # floats: nan = none

    def index_after(self, line: int) -> int:
        """Index of the first record after ``line``."""
        return int(np.searchsorted(self.lines, line, side="right"))

    def next_step(self, line: int) -> int | None:
        i = self.index_after(line)
        if i >= self.lines.size or np.isnan(self.steps[i]):
            return None
        return int(self.steps[i])

    def scale_before(self, line: int) -> tuple[int, float] | None:
        i = int(np.searchsorted(self.lines, line, side="left")) - 1
        if i < 0 or np.isnan(self.scales[i]):
            return None
        return int(self.lines[i]), float(self.scales[i])


class EventReader:
    """Turns event lines, in line order, into events. Tracks the loss scale in force,
    and joins consecutive crash lines (no record or launch between: one crash printed
    by many ranks, a traceback) into one ``hardware_failure`` with the most specific
    cause; the other lines of a crash give no event of their own."""

    def __init__(self, name: str, records: Records) -> None:
        self.name, self.records = name, records
        self.scale: float | None = None
        self.scale_line = -1
        self.crashes: list[list[tuple[int, str, dict]]] = []  # (rank, cause, base) groups
        self.crash_key: int | None = None  # records before the open crash group

    def read(self, line: int, text: str, time: datetime | None) -> list[EventBase]:
        base = {
            "time": time,
            "assumed_tz": "UTC" if time is not None else None,
            "source": Source(file=self.name, line=line),
            "text": text.strip(),
        }
        self._update_scale(line)
        if re.search(_OVERFLOW, text):
            return self._overflow(line, text, base)
        if m := re.search(_BANNER, text):
            self.scale, self.scale_line = _f(m.group(1)), line
            return []
        if m := re.search(_LOADED, text):
            return self._launch(Restart(resume_step=int(m.group(3)), **base))
        if re.search(_FRESH, text):
            return self._launch(Restart(resume_step=0, **base))
        if m := re.search(_SAVED, text):
            took = re.search(_SAVE_TIME, text)
            seconds = _f(took.group(1)) if took else None
            step = int(m.group(3))
            return [CheckpointSave(step=step, path=m.group(1), save_time_s=seconds, **base)]
        if m := re.search(_LR_SCALE, text):
            step = self.records.next_step(line)
            source = "record" if step is not None else None
            new = _f(m.group(2)) or None  # printed with 6 decimals: 0.000000 is unknown
            return [LrChange(step=step, step_source=source, new=new, manual=True, **base)]
        if m := re.search(_SKIP, text):
            n = int(m.group(1))
            return [DataSkip(step=n, start_step=n, end_step=n, **base)]
        self._crash(line, text, base)
        return []

    def finish(self) -> list[EventBase]:
        """The crash events, one per group of crash lines."""
        out: list[EventBase] = []
        for group in self.crashes:
            rank, cause, base = min(group, key=lambda g: g[0])
            nodes = [_node(b["text"]) for _, _, b in group]
            node = next((n for n in nodes if n), None)
            out.append(HardwareFailure(cause=cause, node=node, **base))
        return out

    def _launch(self, marker: Restart) -> list[EventBase]:
        self.crash_key = None  # a crash after a launch is a new crash
        return [marker]

    def _update_scale(self, line: int) -> None:
        before = self.records.scale_before(line)
        if before is not None and before[0] > self.scale_line:
            self.scale_line, self.scale = before

    def _overflow(self, line: int, text: str, base: dict) -> list[EventBase]:
        step = self.records.next_step(line)
        base = {**base, "step": step, "step_source": "record" if step is not None else None}
        if re.search(_REJECT, text):
            return [DataSkip(**base)]
        m = re.search(_NEW_SCALE, text)
        new = _f(m.group(1)) if m else None
        old = self.scale
        out: list[EventBase] = [OverflowSkip(attempted_scale=old, new_scale=new, **base)]
        if new is not None and new != old:
            out.append(LossScaleChange(old=old, new=new, **base))
        if new is not None:
            self.scale, self.scale_line = new, line
        return out

    def _crash(self, line: int, text: str, base: dict) -> None:
        for rank, (cause, pattern) in enumerate(_CRASH_RE):
            if pattern.search(text):
                key = self.records.index_after(line)
                if key != self.crash_key:
                    self.crashes.append([])
                    self.crash_key = key
                self.crashes[-1].append((rank, cause, base))
                return


def _node(text: str) -> str | None:
    m = _NODE.search(text)
    return (m.group(1) or m.group(2)) if m else None
