"""Start-up settings that trainers echo (Megatron's argument dump, the Hugging Face
Trainer's ``TrainingArguments``): their values typed, and what a relaunch changed as
events.

A run's settings are kept in its metadata as ``arguments`` (the first echo's) and
``argument_changes`` (each value a later echo gives otherwise than the echo before). A
change becomes an event at the first record after the line that states it: a manual
``lr_change`` for ``lr``, a ``config_change`` for any other key.
"""

from __future__ import annotations

import re

import numpy as np

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def typed_value(raw: str) -> str | int | float | bool | None:
    """A printed setting as a value: booleans, None, ints and floats as such."""
    if raw in ("True", "False"):
        return raw == "True"
    if raw == "None":
        return None
    if _NUMBER.fullmatch(raw):
        number = float(raw)
        whole = number.is_integer() and not any(c in raw for c in ".eE")
        return int(raw) if whole else number
    return raw


def changes_between(dumps: dict[int, dict], where: dict[tuple[int, str], int]) -> dict:
    """``{"arguments": ..., "argument_changes": [...]}`` of the echoes ``dumps`` (echo
    number -> its settings; ``where``: (echo, key) -> the line that states it)."""
    dumps = {d: v for d, v in dumps.items() if v}
    if not dumps:
        return {}
    order = sorted(dumps)
    out: dict = {"arguments": dumps[order[0]]}
    seen = dict(dumps[order[0]])
    changes = []
    for d in order[1:]:
        for key, value in dumps[d].items():
            if key in seen and seen[key] != value:
                changes.append({"line": where[d, key], "key": key, "old": seen[key], "new": value})
            seen[key] = value
    if changes:
        out["argument_changes"] = changes
    return out


def change_events(
    changes: list[dict], rec_lines: np.ndarray, rec_steps: np.ndarray, name: str, told: str
) -> list:
    """A relaunch's changed settings as events at the step of the first record after the
    line that states each (none for a change with no record after it); ``told``: what
    printed them, for the event's text."""
    from logbook.schema import ConfigChange, LrChange, Source

    out = []
    for c in changes:
        if c["line"] is None:
            continue
        rc = int(np.searchsorted(rec_lines, c["line"]))
        if rc >= rec_lines.size or not rec_steps[rc] >= 0:
            continue
        step, src = int(rec_steps[rc]), Source(file=name, line=c["line"])
        old, new = c["old"], c["new"]
        text = f"{c['key']}: {old} -> {new} ({told})"
        if c["key"] == "lr" and _number(old) and _number(new):
            out.append(LrChange(step=step, old=old, new=new, manual=True, source=src, text=text))
        else:
            out.append(
                ConfigChange(
                    step=step, key=c["key"], old=_plain(old), new=_plain(new), source=src, text=text
                )  # fmt: skip
            )
    return out


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _plain(v: object) -> str | float | None:
    if v is None:
        return None
    return v if _number(v) else str(v)
