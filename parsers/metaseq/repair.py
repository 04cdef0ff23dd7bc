"""Second chance for ``train_inner`` lines whose JSON payload did not decode.

Two damages are mended, one line at a time in Python (they are rare):

* a record hard-wrapped over several physical lines (a terminal or a paste broke it):
  the payload is joined with up to three following lines that are not log lines of
  their own, with nothing or a space between (a wrap may fall inside a token);
* records glued on one line (two ranks writing at once, a lost newline): each
  ``| train_inner | {...}`` piece is decoded on its own, and the line holds them all.

Anything else (a payload cut short, corrupted bytes) stays unrecognized.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from parsers.json_decode import stringify
from parsers.metaseq.json import MARK
from parsers.metaseq.lines import TIMESTAMP

_MAX_WRAP = 3
_LOG_LINE = re.compile(TIMESTAMP + r" \| |\| train_inner \| ")
_TIME = re.compile(TIMESTAMP)


def _obj(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _time(text: str) -> datetime | None:
    found = _TIME.findall(text)
    if not found:
        return None
    stamp = found[-1].replace("T", " ").replace(",", ".")
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
    try:
        return datetime.strptime(stamp, fmt).replace(tzinfo=UTC)
    except ValueError:  # (a date that does not exist: year 0, month 13)
        return None


def _glued(text: str) -> list[dict[str, Any]] | None:
    starts = [m.start() for m in re.finditer(re.escape(MARK), text)]
    if len(starts) < 2:
        return None
    out = []
    for k, s in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        piece = text[s + len(MARK) - 1 : end]
        obj = _obj(piece[: piece.rfind("}") + 1])
        if obj is None:
            return None
        before = text[starts[k - 1] if k else 0 : s]
        out.append({"time": _time(before), **stringify(obj)})
    return out


def _wrapped(
    payload: str, line: int, texts: pl.Series, taken: np.ndarray
) -> tuple[dict[str, Any], list[int]] | None:
    joined = payload
    for j in range(1, _MAX_WRAP + 1):
        nxt = line + j
        if nxt > texts.len() or taken[nxt - 1]:
            return None
        more = texts[nxt - 1]
        if not more.strip() or _LOG_LINE.search(more):
            return None
        for sep in ("", " "):
            obj = _obj(joined + sep + more.strip())
            if obj is not None:
                return stringify(obj), list(range(line + 1, nxt + 1))
        joined = joined + more.strip()
    return None


def repair(
    bad: pl.DataFrame, lines: pl.DataFrame, taken: np.ndarray
) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """``bad``: the undecoded record lines (``line``, ``text``, ``payload``, ``time``);
    ``taken``: per line of the file, whether a record or event line already has it
    (updated here). Returns the mended records (text values, with ``line`` and
    ``time``), the extra lines they used, and the lines still unreadable."""
    texts = lines.get_column("text")
    rows: list[dict[str, Any]] = []
    used: list[int] = []
    still: list[int] = []
    for line, text, payload, time in bad.select("line", "text", "payload", "time").iter_rows():
        if glued := _glued(text):
            rows += [{"line": line, **g} for g in glued]
            continue
        wrapped = _wrapped(payload, line, texts, taken)
        if wrapped is None:
            still.append(line)
            continue
        obj, extra = wrapped
        rows.append({"line": line, "time": time, **obj})
        used += extra
        taken[np.array(extra) - 1] = True
    return rows, used, still
