"""Hugging Face ``Trainer``: ``trainer_state.json`` and output directories.

A ``trainer_state.json`` (at the top of an output directory after ``save_state()``, and
in every ``checkpoint-N/``) holds ``log_history``: training rows become records
(``loss``, ``learning_rate``->``lr``, ``grad_norm``, ``num_input_tokens_seen``->
``tokens``, ``epoch``, and any other number under its snake_case name), evaluation rows
(``eval_*``) become ``validation`` events, and the summary row written at the end of
``train()`` goes to the run's metadata (``meta["summary"]``), as do the file's settings.

Two properties of these logs are flagged for the detectors, in ``meta["caveats"]`` and
as machine-readable keys: the logged ``loss`` is the mean over the logging window
(``meta["loss_window_averaged"] = True``, ``meta["loss_window_steps"]`` =
``logging_steps``), so a one-step spike shows diluted; and with
``logging_nan_inf_filter`` (on by default) a NaN/Inf step loss is replaced by the mean
of the others, so a missing NaN proves nothing (``meta["nonfinite_filtered"] = True``).

A directory is read with all its ``trainer_state.json`` files: see
``parsers.hf_trainer.dirs``. Every line is accounted for: a training entry is one
record (its first line; the entry's other lines in ``meta["continued_lines"]``), an
evaluation entry one event, the rest (the file's settings, the summary) is ignored.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers.columns import snake, with_core
from parsers.hf_trainer import state as hs

NAME = "hf-trainer"
DESCRIPTION = "Hugging Face Trainer trainer_state.json, or an output dir with checkpoint-N/"
EXAMPLE = (
    '{"epoch": 0.25, "grad_norm": 0.97, "learning_rate": 0.00075, "loss": 3.89, '
    '"num_input_tokens_seen": 256, "step": 4}  (an entry of "log_history")'
)
MAPS = (
    "log_history: step->step, loss->loss (mean over the logging window), learning_rate->"
    "lr, grad_norm->grad_norm, num_input_tokens_seen->tokens, epoch and other numbers kept; "
    "eval_* rows->validation events; final train_runtime/train_loss row->metadata"
)

RENAME = {"learning_rate": "lr", "num_input_tokens_seen": "tokens"}
INTEGER = ("step", "tokens")
RESERVED = ("time", "segment", "source", "line")
WINDOW_CAVEAT = (
    "Hugging Face Trainer: each loss is the mean of the per-step losses since the previous "
    "log (logging_steps={k}): a one-step spike shows diluted by up to {k}x"
)
NAN_CAVEAT = (
    "Hugging Face Trainer: with logging_nan_inf_filter (on by default) a NaN/Inf step loss "
    "is replaced by the mean of the window's other losses: NaN steps may not show in the loss"
)


SNIFF_MAX = 95  # the highest score sniff gives


_HISTORY = re.compile(r'"log_history"\s*:\s*\[')
_GLOBAL_STEP = re.compile(r'"global_step"\s*:')


def sniff(head: list[str]) -> int:
    """95 when the head is a trainer_state.json (``"log_history": [`` beside
    ``"global_step"``), 60 for a piece of its ``log_history`` pasted alone (two or more
    indented entries with a step), else 0."""
    text = "\n".join(head[:200])  # indented by the Trainer, or compact as pasted
    # several whole objects, one a line, are a JSONL log (whose last line may hold a
    # trainer state: ms-swift's ``logging.jsonl``), not one trainer_state.json
    whole = [h for h in head[:200] if h.lstrip().startswith("{") and h.rstrip().endswith("}")]
    if len(whole) >= 2:
        return 0
    if _HISTORY.search(text) and _GLOBAL_STEP.search(text):
        return 95
    return 60 if hs.piece_entries(head[:200]) >= 2 else 0


def sniff_path(path: Path) -> int:
    """90 for a directory holding ``trainer_state.json`` or ``checkpoint-*/
    trainer_state.json``; files are sniffed by their text."""
    if not path.is_dir():
        return 0
    from parsers.hf_trainer.dirs import state_files

    return 90 if state_files(path) else 0


def read_path(path: Path) -> list[Parsed]:
    from parsers.hf_trainer.dirs import read_dir

    return read_dir(Path(path))


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    return from_state(hs.load(lines, name))


def from_state(state: hs.State) -> Parsed:
    """The records and events of one file."""
    train, evals, summary = [], [], None
    continued = 0
    for row, line, span in zip(state.rows, state.lines, state.entry_lines, strict=True):
        k = hs.kind(row)
        if k == "summary":
            summary = row
        elif k == "eval":
            evals.append(_validation(row, line, state.name))
            continued += max(span - 1, 0)
        else:
            train.append({**row, "_line": line})
            continued += max(span - 1, 0)
    return Parsed(
        metrics=with_core(_metrics(train)),
        events=evals,
        meta=_meta(state, summary, continued),
        ignored=state.line_count - len(train) - len(evals) - continued,
    )


def _metrics(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64})
    cols: dict[str, list[Any]] = {"line": [r["_line"] for r in rows]}
    names: dict[str, str] = {}
    for r in rows:
        for k in r:
            if k != "_line" and k not in names:
                name = RENAME.get(k, snake(k))
                names[k] = f"{name}_value" if name in RESERVED else name
    for key, name in names.items():
        values = [hs.number(r.get(key)) for r in rows]
        if any(v is not None for v in values):
            cols[name] = values
    frame = pl.DataFrame(cols, schema_overrides={c: pl.Float64 for c in cols if c != "line"})
    casts = [pl.col(c).round(0).cast(pl.Int64, strict=False) for c in INTEGER if c in frame.columns]
    return frame.with_columns(casts)


def _validation(row: dict[str, Any], line: int, name: str) -> EventBase:
    split, values = hs.split_values(row)
    step = hs.number(row.get("step"))
    return Validation(
        # (a step that is no finite number in int64's range is no step)
        step=int(step) if step is not None and math.isfinite(step) and abs(step) < 2**63 else None,
        split=split,
        values=values,
        source=Source(file=name, line=line),
    )


def _spacing(rows: list[dict[str, Any]]) -> int | None:
    """The commonest gap between the steps of consecutive training rows (the
    ``logging_steps`` of a state that does not state it), None without two rows."""
    steps = [r["step"] for r in rows if hs.kind(r) == "train" and type(r.get("step")) is int]
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False) if b > a]
    return max(set(gaps), key=gaps.count) if gaps else None


def _meta(state: hs.State, summary: dict[str, Any] | None, continued: int) -> dict[str, Any]:
    window = state.data.get("logging_steps")
    if not (isinstance(window, int) and window > 0):
        window = _spacing(state.rows)
    k = window or "?"
    settings = {
        key: state.data.get(key)
        for key in ("global_step", "max_steps", "logging_steps", "eval_steps", "save_steps",
                    "num_train_epochs", "train_batch_size", "total_flos", "best_metric",
                    "best_model_checkpoint")
        if state.data.get(key) is not None
    }  # fmt: skip
    caveats = [WINDOW_CAVEAT.format(k=k), NAN_CAVEAT]
    if set(state.data) <= {"log_history"}:
        caveats.append(
            "a piece of log_history without the file around it: the run's settings are "
            "unknown (logging_steps taken from the entries' spacing)"
        )
    if state.cut:
        caveats.append(
            f"the JSON is cut short inside log_history: its {len(state.rows)} complete "
            "entries were read, the rest is lost"
        )
    return {
        "caveats": caveats,
        "loss_window_averaged": True,
        "loss_window_steps": window if isinstance(window, int) else None,
        "nonfinite_filtered": True,
        "trainer_state": settings,
        "summary": summary,
        "continued_lines": continued,
        "file": state.name,
        "lines": state.line_count,
    }
