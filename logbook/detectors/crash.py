"""``crash``: the run ends in crash evidence and nothing resumes it.

The parsers turn crash evidence into ``hardware_failure`` events (a CUDA or NCCL error,
out of memory, a bus error, a watchdog timeout, a time-limit kill, an uncaught exception
or a traceback cut before it, a loss that stopped the script). Evidence followed by a
``restart`` is that restart's cause (the ``restarts`` detector reports it). Fires once per
run whose evidence comes after its last record (or is glued onto its line: a traceback
begun on a progress bar's last redraw) with no restart after it: that is how the run
ended. The finding sits at the last step recorded (no step when the log shows no
record at all: a crash at start-up) and names the most specific cause seen and the line
that printed it. A message that says a non-finite loss stopped training, at the last
step recorded (Keras' TerminateOnNaN, printed onto the progress bar before its last
redraw), ends the run wherever it was printed. Severity: critical; warning when a
person stopped the run (an interrupt, a cancelled job).

Stays quiet on: evidence that records follow (an out-of-memory message the script
survived, a warning with a traceback), and a planned exit (Megatron's
``--exit-interval`` and ``--exit-duration-in-mins``, after a checkpoint save).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from pydantic import Field

from logbook.detectors._base import Detector, DetectorConfig, finding
from logbook.detectors._frame import Context
from logbook.schema import EventBase, Finding, HardwareFailure, Restart, Severity

NAME = "crash"
# causes a person chose: the run was stopped, not broken
STOPPED = ("interrupted", "cancelled")
PLANNED = ("planned_exit",)
# the order in which a cause explains a crash best (the most specific first); causes not
# listed come before these, "process_exit" and "exception" after them, and a SIGTERM last
# of all where anything else is said (torchrun's ``Sending process N closing signal
# SIGTERM`` to the other ranks follows the failure it tears down after)
SPECIFIC_LAST = ("process_exit", "exception", "sigterm", "unknown")


class Config(DetectorConfig):
    """Crash reporting."""

    stopped_severity: Severity = Field(
        "warning", description="Severity of a run a person stopped (interrupt, cancelled job)."
    )


def _pos(e: EventBase, files: list[str]) -> tuple[int, int]:
    src = e.source
    if src is None:
        return (-1, -1)
    index = files.index(src.file) if src.file in files else -1
    return (index, src.line or 0)


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    events = ctx.run.events
    failures = [e for e in events if isinstance(e, HardwareFailure) and e.cause not in PLANNED]
    if not failures:
        return []
    files = list(ctx.run.meta.sources)
    m = ctx.run.metrics
    last_pos = (-1, -1)
    last_step = None
    if m.height:
        order = m.select(pl.col("source", "line").fill_null(0), "step").sort(["source", "line"])
        tail = order.row(-1)
        last_pos = (int(tail[0]), int(tail[1]))
        # the step of the last record written (a second run from step 0 ends lower than
        # the first one reached), else the largest
        steps = order.get_column("step").drop_nulls()
        last_step = int(steps[-1]) if steps.len() else None
    # evidence after the last record and the last restart (none without a source)
    bound = max([last_pos, *(_pos(e, files) for e in events if isinstance(e, Restart))])
    # (a message that says training stops, at the last step recorded, ends it wherever
    # it was printed: Keras' TerminateOnNaN prints onto a bar before its last redraw)
    ending = [
        e
        for e in failures
        if e.source is not None
        and (
            _pos(e, files) > bound
            or (_pos(e, files) == last_pos == bound)  # glued onto the last record's line
            or _stops_at_end(e, last_step, bound, files, events)
        )
    ]
    if not ending:
        return []
    best = min(ending, key=lambda e: _rank(e.cause))
    src = best.source
    assert src is not None
    stopped = all(e.cause in STOPPED for e in ending)
    at = f"after step {last_step}" if last_step is not None else "before any record"
    verb = "stopped" if stopped else "ended"
    msg = f"run {verb} {at}: {best.cause} ({Path(src.file).name}:{src.line})"
    causes = sorted({e.cause for e in ending}, key=_rank)
    seg = int(m.get_column("segment").max() or 0) if m.height else 0
    return [
        finding(
            "crash",
            NAME,
            cfg.stopped_severity if stopped else "critical",
            step=last_step,
            start_step=last_step,
            end_step=last_step,
            score=None,
            message=msg,
            segment=seg,
            evidence={
                "cause": best.cause,
                "causes": causes,
                "file": src.file,
                "line": src.line,
                "text": (best.text or "")[:200] or None,
                "evidence_lines": len(ending),
            },
        )
    ]


def _stops_at_end(
    e: HardwareFailure, last_step: int | None, bound: tuple, files: list, events: list
) -> bool:
    """A loss that stopped the script, stated at the last recorded step or later, with no
    restart after it."""
    if e.cause != "nonfinite_loss" or e.step is None or last_step is None:
        return False
    restarts = [_pos(r, files) for r in events if isinstance(r, Restart)]
    return e.step >= last_step and not any(p > _pos(e, files) for p in restarts)


def _rank(cause: str) -> int:
    return SPECIFIC_LAST.index(cause) + 100 if cause in SPECIFIC_LAST else 0


DETECTOR = Detector(name=NAME, config=Config, fn=detect, kinds=("crash",), doc=__doc__ or "")
