"""The results table of a Hugging Face ``Trainer`` run: the ``Training results``
section of a model card the Trainer writes (Markdown), or the progress table a notebook
shows, pasted as text (tab separated)::

    | Training Loss | Epoch | Step | Validation Loss | Wer    |
    |:-------------:|:-----:|:----:|:---------------:|:------:|
    | No log        | 0.92  | 100  | 3.5932          | 1.0    |
    | 3.1829        | 4.59  | 500  | 0.4931          | 0.5265 |
    | 3.1829        | 5.5   | 600  | 0.4757          | 0.4784 |

One row per evaluation. The training loss is the last one logged: ``No log`` before
the first log, and the same value again on every row until the next log (evaluation
more often than logging). So a row is a training record only where its loss is new;
every row's other columns are a validation event. The table may sit anywhere in the
text (a model card's prose and hyperparameters above it, which are put aside).
"""

from __future__ import annotations

import math
import re

import polars as pl

from logbook.parsed import Parsed
from logbook.schema import Source, Validation
from parsers.columns import with_core
from parsers.reader import aliases
from parsers.reader.numbers import to_float

NAME = "hf-trainer-table"
DESCRIPTION = "a Hugging Face Trainer results table (a model card's, or a notebook's, pasted)"
EXAMPLE = "| Training Loss | Epoch | Step | Validation Loss | Accuracy |"
MAPS = (
    "Training Loss->loss (rows that repeat it or say 'No log' are not records), "
    "Step->step (else Epoch), Epoch->epoch; the other columns -> validation events"
)
SNIFF_MAX = 70

_TRAIN_LOSS = "training_loss"
_EVAL_COLUMNS = ("validation", "eval", "val_", "test")
_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")
_NO_LOG = "no log"


def _cells(line: str) -> list[str] | None:
    """The cells of a Markdown row (``| a | b |``) or a tab-separated one; None for a
    line of neither kind."""
    s = line.strip()
    if s.startswith("|"):
        parts = s.strip("|").split("|")
    elif "\t" in s:
        parts = s.split("\t")
    elif " | " in s:  # a notebook's table pasted without its outer bars
        parts = s.split("|")
    else:
        return None
    # a cell set in bold (``**0.2215**``, the checkpoint a card's authors kept)
    return [p.strip().strip("*`").strip() for p in parts]


def _is_header(cells: list[str] | None) -> bool:
    if not cells:
        return False
    names = {aliases.norm(c) for c in cells}
    return _TRAIN_LOSS in names and bool(names & {"step", "epoch"})


def sniff(head: list[str]) -> int:
    """70 for a header row with ``Training Loss`` and ``Step`` or ``Epoch`` (then rows of
    as many cells); else 0."""
    for i, line in enumerate(head):
        cells = _cells(line)
        if not _is_header(cells):
            continue
        rows = [c for x in head[i + 1 : i + 6] if (c := _cells(x)) and not _RULE.match(x)]
        if rows and all(len(r) == len(cells or []) for r in rows):
            return SNIFF_MAX
    return 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    """The records (rows with a new training loss) and validation events of every
    results table in the text; the other lines are put aside."""
    records: list[dict] = []
    events: list[Validation] = []
    repeats = 0
    by_epoch = False
    seen: dict[int, float | None] = {}  # step -> loss of the rows read
    trained = False  # a table of training logs seen
    for header, rows in _tables(lines):
        by_epoch |= "step" not in header
        # a table with no evaluation column is a training log's (a notebook's progress
        # table of a trainer with no evaluation): its other columns are the records'
        training = not any(h.startswith(_EVAL_COLUMNS) for h in header)
        trained |= training
        fresh = _fresh(rows)
        for k, (_, row, _) in enumerate(rows):
            step = round(row["_step"])
            if fresh[k] and step in seen and seen[step] == row["_loss"]:
                fresh[k] = False  # the table printed again (a notebook's output re-rendered)
        repeats += len(rows) - sum(fresh)
        for (line, row, text), new in zip(rows, fresh, strict=True):
            step = round(row["_step"])
            values = {
                _eval_key(k): x
                for k, v in row.items()
                if not k.startswith("_") and k not in (_TRAIN_LOSS, "step", "epoch")
                and (x := _number(v)) is not None
            }  # fmt: skip
            if new:
                seen[step] = row["_loss"]
                rec = {"line": line, "step": step, "loss": row["_loss"]}
                if "epoch" in row and "step" in row:
                    rec["epoch"] = _number(row["epoch"])
                if training:
                    rec |= {k: v for k, v in values.items() if k not in ("line", "loss")}
                records.append(rec)
            if values and not training:
                source = Source(file=name, line=line)
                events.append(
                    Validation(step=step, split="eval", values=values, source=source, text=text)
                )
    metrics = (
        pl.DataFrame(records, schema_overrides={"step": pl.Int64, "loss": pl.Float64})
        if records
        else pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64, "loss": pl.Float64})
    )
    record_lines = {r["line"] for r in records}
    used = len(records) + sum(1 for e in events if e.source.line not in record_lines)
    caveats = [
        "a Trainer results table: a row per evaluation, each showing the last training "
        f"loss logged; {repeats} row(s) repeat an earlier log or say 'No log' and are "
        "not records"
        if not trained
        else "a Trainer progress table with no evaluation column: a row per training log; "
        f"{repeats} row(s) repeat an earlier one and are not records"
    ]
    if by_epoch:
        caveats.append("no Step column: the epoch is the step (one row an evaluation)")
    return Parsed(
        metrics=with_core(metrics),
        events=events,
        meta={"caveats": caveats},
        ignored=lines.height - used,
    )


Row = tuple[int, dict, str]  # (line, cells by column with ``_step`` and ``_loss``, text)


def _tables(lines: pl.DataFrame) -> list[tuple[list[str], list[Row]]]:
    """Every results table: its columns (normalized) and its rows with a step."""
    tables: list[tuple[list[str], list[Row]]] = []
    header: list[str] | None = None
    for text, line in lines.select("text", "line").iter_rows():
        cells = _cells(text)
        if _is_header(cells):
            header = [aliases.norm(c) for c in cells or []]
            tables.append((header, []))
            continue
        if header is None or _RULE.match(text):
            continue
        if cells is None or len(cells) != len(header):  # the table ends
            header = None
            continue
        row: dict = dict(zip(header, cells, strict=True))
        row["_step"] = _number(row.get("step", row.get("epoch")))
        row["_loss"] = _number(row.get(_TRAIN_LOSS))
        if _is_step(row["_step"]):
            tables[-1][1].append((line, row, text.strip()[:300]))
    return tables


MAX_STEP = 2**53  # a float beyond this is no step a run counts (a damaged cell)


def _is_step(value: float | None) -> bool:
    """A cell that can be a step: finite, not negative, below 2^53 (a row without one
    is put aside with the table's other lines)."""
    return value is not None and math.isfinite(value) and 0 <= value < MAX_STEP


def _fresh(rows: list[Row]) -> list[bool]:
    """Which rows show a training loss logged since the row before. The Trainer logs
    every ``logging_steps`` (L): a row shows a new log when a multiple of L lies
    between the step of the row before (excluded) and its own. L is the greatest
    common divisor of the steps where the shown loss changes; without a step column
    (epochs) or a change, a row is new where its loss differs from the one before."""
    shown = [r[1]["_loss"] for r in rows]
    steps = [r[1]["_step"] for r in rows]
    changes = [i for i, v in enumerate(shown) if v is not None and (i == 0 or shown[i - 1] != v)]
    whole = all(float(s).is_integer() and s > 0 for s in steps)
    period = math.gcd(*(int(steps[i]) for i in changes)) if changes and whole else 0
    if not period or "step" not in rows[0][1]:
        return [i in changes for i in range(len(rows))]
    out = []
    for i, v in enumerate(shown):
        before = int(steps[i - 1]) if i else 0
        out.append(v is not None and int(steps[i]) // period > before // period)
    return out


def _number(cell: str | None) -> float | None:
    if cell is None or cell.strip().lower() in ("", _NO_LOG):
        return None
    try:
        return float(cell)
    except ValueError:
        pass
    got = pl.select(to_float(pl.lit(cell.strip()))).item()
    return None if got is None else float(got)


def _eval_key(key: str) -> str:
    """``validation_loss`` -> ``loss``; other columns as they are (snake_case)."""
    return key.removeprefix("validation_").removeprefix("eval_") or key
