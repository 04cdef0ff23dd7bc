"""One Hugging Face ``trainer_state.json`` -> its log rows, each with its first line.

``Trainer`` writes the file with ``json.dumps(state, indent=2, sort_keys=True)``: each
``log_history`` entry opens with a line holding only ``    {``. The rows are of three
kinds: training logs (``loss``, ``grad_norm``, ``learning_rate``, ``epoch``, ``step``,
``num_input_tokens_seen``, and whatever a subclass adds), evaluation logs (keys
``eval_*``; ``eval_<name>_*`` for a dict of eval sets; ``test_*`` from ``predict``) and
the final summary written when ``train()`` returns (``train_runtime``, ``train_loss``,
``total_flos``...).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from logbook.errors import InputError

EVAL_PREFIX = re.compile(r"^(eval|test|val|validation|predict)_")
SUMMARY_KEYS = ("train_runtime", "train_loss", "total_flos")
_ENTRY = "    {"


@dataclass
class State:
    """The file's settings, its log rows and the first line of each row."""

    name: str
    data: dict[str, Any]
    rows: list[dict[str, Any]]
    lines: list[int]  # 1-based line where each row begins
    line_count: int
    entry_lines: list[int] = field(default_factory=list)  # lines each entry spans
    cut: bool = False  # the JSON ends before its log_history closes

    @property
    def global_step(self) -> int:
        return int(self.data.get("global_step") or 0)


def load(lines: pl.DataFrame, name: str) -> State:
    """Decode the file (``lines``: the frame of ``logbook.textio``); ``#`` comment lines
    above the JSON (a collector's ``# source:``) are left out. A state pasted into an
    issue is read too: text before its ``{`` and after its ``}`` is left out, and one
    cut short keeps its complete log entries (``State.cut``: the entries read)."""
    texts = lines.get_column("text").to_list()
    skip = next((i for i, t in enumerate(texts) if not t.lstrip().startswith("#")), len(texts))
    text = "\n".join(texts[skip:])
    cut = False
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        data = _pasted(text)
        if data is None:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(f"{name}: not a readable trainer_state.json ({why[:200]})") from None
        cut = bool(data.pop(_CUT, False))
    if not isinstance(data, dict) or not isinstance(data.get("log_history"), list):
        raise InputError(f"{name}: not a trainer_state.json (no log_history list)")
    rows = [r for r in data["log_history"] if isinstance(r, dict)]
    if len(rows) != len(data["log_history"]):
        raise InputError(f"{name}: log_history holds entries that are not objects")
    starts, spans = _entry_lines(lines, len(rows))
    return State(name, data, rows, starts, lines.height, spans, cut)


_CUT = "\0cut"
_TOP_KEY = re.compile(r'^ {2}"(\w+)":\s*([-\w.+"]+),?\s*$', re.M)


def _pasted(text: str) -> dict[str, Any] | None:
    """A trainer state inside other text: the object from its first ``{`` (prose
    around it left out), or, when it is cut short, its top-level scalar settings and
    the complete entries of ``log_history`` (marked ``_CUT``); None when not one entry
    of a log_history can be read."""
    start = text.find("{")
    history = re.search(r'"log_history"\s*:\s*\[', text)
    if start < 0:
        return None
    if history is None:
        return _piece(text)
    decoder = json.JSONDecoder()
    if start > history.start():  # the paste lost the object's opening ``{``
        start = 0
    else:
        try:
            data, _ = decoder.raw_decode(text, start)
            if isinstance(data, dict) and "log_history" in data:
                return data
        except (ValueError, RecursionError):
            pass
    data: dict[str, Any] = {}
    for key, value in _TOP_KEY.findall(text[start : history.start()]):
        try:
            data[key] = json.loads(value)
        except ValueError:
            continue
    entries: list[Any] = []
    pos = history.end()
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            data[_CUT] = True  # an entry cut off: the rest of the text is lost
            break
        entries.append(entry)
    if pos >= len(text):  # no ``]``: the text ends inside log_history
        data[_CUT] = True
    if not entries:
        return None
    data["log_history"] = entries
    return data


# an entry of log_history as the Trainer indents it, or as pasted: ``{`` alone on its line
_OPEN = re.compile(r"^[ \t]*\{[ \t]*$", re.M)
_STEP_KEY = re.compile(r'^[ \t]*"step"\s*:\s*\d+,?\s*$')


def _piece(text: str) -> dict[str, Any] | None:
    """A piece of ``log_history`` pasted without the file around it (an issue quotes
    the entries around a spike): the entries that each open on a line of their own;
    None unless two or more are read and every one has a step."""
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    pos, cut = 0, False
    for m in _OPEN.finditer(text):
        at = text.index("{", m.start())
        if at < pos:  # (inside the entry before)
            continue
        try:
            entry, pos = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            cut = True  # an entry cut off (the paste's last)
            break
        entries.append(entry)
    if len(entries) < 2 or not all(isinstance(e, dict) and "step" in e for e in entries):
        return None
    return {"log_history": entries, _CUT: cut}


def piece_entries(head: list[str]) -> int:
    """How many entries of a pasted piece of ``log_history`` open in the head (its
    lines ``{``, each with a ``"step"`` key line after it)."""
    opens = sum(bool(_OPEN.match(h)) for h in head)
    steps = sum(bool(_STEP_KEY.match(h)) for h in head)
    return min(opens, steps)


def _entry_lines(lines: pl.DataFrame, n: int) -> tuple[list[int], list[int]]:
    """The first line of each log_history entry and how many lines each spans, when the
    file has Trainer's layout; else every row at the line of ``"log_history"``."""
    text = lines.get_column("text")
    head = lines.filter(text.str.starts_with('  "log_history": ['))
    if head.height != 1:
        return _piece_lines(lines, n)
    first = int(head.get_column("line")[0])
    body = lines.filter(pl.col("line") > first)
    close = body.filter(pl.col("text").str.starts_with("  ]")).get_column("line")
    last = int(close[0]) if close.len() else lines.height + 1
    opens = pl.col("text").str.strip_chars_end() == _ENTRY
    entries = body.filter((pl.col("line") < last) & opens)
    starts = entries.get_column("line").to_list()
    if len(starts) == n + 1 and not close.len():  # the last entry cut short
        last, starts = starts[-1], starts[:-1]
    if len(starts) != n:
        return [first] * n, [0] * n
    ends = starts[1:] + [last]
    return starts, [b - a for a, b in zip(starts, ends, strict=True)]


def _piece_lines(lines: pl.DataFrame, n: int) -> tuple[list[int], list[int]]:
    """The entries' first lines and spans in a pasted piece (each from its ``{`` to its
    ``}``); every row at line 1 when the lines do not pair up so."""
    bare = pl.col("text").str.strip_chars()
    starts = lines.filter(bare == "{").get_column("line").to_list()
    ends = lines.filter(bare.is_in(["}", "},"])).get_column("line").to_list()
    if len(starts) == n + 1 and len(ends) == n:  # the last entry cut short
        starts = starts[:-1]
    paired = len(starts) == n == len(ends)
    if not paired or any(not a < b for a, b in zip(starts, ends, strict=True)):
        return [1] * n, [0] * n
    return starts, [b - a + 1 for a, b in zip(starts, ends, strict=True)]


def kind(row: dict[str, Any]) -> str:
    """``train``, ``eval`` or ``summary``."""
    # the summary: its three keys, or a runtime without the loss and LR of a step's log
    summary = "train_runtime" in row and "loss" not in row and "learning_rate" not in row
    if summary or all(k in row for k in SUMMARY_KEYS):
        return "summary"
    if any(EVAL_PREFIX.match(k) for k in row):
        return "eval"
    return "train"


def number(v: Any) -> float | None:
    """A JSON value as a float (NaN, Infinity kept), None when it is not a number."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def split_values(row: dict[str, Any]) -> tuple[str, dict[str, float | None]]:
    """An eval row's split (its key prefix) and its values without the prefix."""
    prefixes = [m.group(1) for k in row if (m := EVAL_PREFIX.match(k))]
    split = max(set(prefixes), key=prefixes.count)
    values = {
        k[len(split) + 1 :]: number(v)
        for k, v in row.items()
        if k.startswith(split + "_") and number(v) is not None
    }
    return split, values
