"""Events of Megatron-family logs, built from the few event lines (a Python loop over
those lines only): launches, crashes, checkpoint saves, validations, overflow skips.

A launch prints many lines (world size, seeds, checkpoint load, ...) and a crash many
more (each rank's traceback): consecutive lines of one kind with no record between
them become one event. A launch made only of weak evidence (the collector's
pasted-block separator, a note saying "after restart") counts only when training
records follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from logbook.schema import (
    CheckpointSave,
    EventBase,
    HardwareFailure,
    OverflowSkip,
    Restart,
    Source,
    Validation,
)
from parsers.megatron.lines import PREFIX_RE
from parsers.megatron.patterns import read_event_line

TEXT_MAX = 300
_LAUNCH_TEXT_ORDER = {"load": 0, "fresh": 1, "strong": 2, "weak": 3}


@dataclass
class Item:
    line: int
    rc: int  # records that start before this line
    cat: str
    data: dict[str, Any]
    text: str
    time: datetime | None


@dataclass
class Group:
    cat: str
    items: list[Item] = field(default_factory=list)

    @property
    def rc(self) -> int:
        return self.items[0].rc


@dataclass
class EventLines:
    """What the event lines gave: events, and the lines that gave nothing."""

    events: list[EventBase]
    launch_lines: list[int]  # first line of each launch kept as an event
    unread: list[int]  # picked as event lines but read by no pattern: unrecognized
    dropped: list[int]  # weak launch evidence with no training after it: ignored


def read_items(ev: pl.DataFrame, rec_lines: np.ndarray) -> tuple[list[Item], list[int]]:
    """Read every event line (``line``, ``text``); ``rec_lines`` are the records'
    first lines, in order."""
    lines = ev.get_column("line").to_numpy()
    rcs = np.searchsorted(rec_lines, lines, side="left")
    items: list[Item] = []
    unread: list[int] = []
    for (line, text), rc in zip(ev.iter_rows(), rcs, strict=True):
        m = PREFIX_RE.match(text)
        body = text[m.end() :] if m else text
        got = read_event_line(text, body)
        if got is None:
            unread.append(line)
            continue
        stamp = m.group("ts") if m else None
        items.append(Item(line, int(rc), got[0], got[1], body.strip()[:TEXT_MAX], _time(stamp)))
    return items, unread


def _time(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace(",", "."))
    except ValueError:
        return None


def build_events(
    items: list[Item], rec_lines: np.ndarray, rec_steps: np.ndarray, name: str
) -> EventLines:
    launches, crashes = _group(items)
    kept, dropped = _keep_launches(launches, crashes, len(rec_lines))
    out: list[EventBase] = [_restart(g, name, rec_steps) for g in kept]
    out += [_failure(g, name) for g in crashes]
    out += _saves([i for i in items if i.cat in ("save", "save_time")], name)
    out += _validations([i for i in items if i.cat == "validation"], name)
    launch_lines = sorted(g.items[0].line for g in kept)
    out += _overflows(
        [i for i in items if i.cat == "overflow"], rec_lines, rec_steps, launch_lines, name
    )
    return EventLines(out, launch_lines, [], [i.line for g in dropped for i in g.items])


def _group(items: list[Item]) -> tuple[list[Group], list[Group]]:
    """Consecutive launch lines (no record, no crash between) form one launch;
    consecutive crash lines (no record, no launch between) one crash."""
    launches: list[Group] = []
    crashes: list[Group] = []
    cur_launch: Group | None = None
    cur_crash: Group | None = None
    for it in items:
        if it.cat == "launch":
            if cur_launch is None or cur_launch.rc != it.rc:
                cur_launch = Group("launch")
                launches.append(cur_launch)
            cur_launch.items.append(it)
            cur_crash = None
        elif it.cat == "crash":
            if cur_crash is None or cur_crash.rc != it.rc:
                cur_crash = Group("crash")
                crashes.append(cur_crash)
            cur_crash.items.append(it)
            cur_launch = None
    return launches, crashes


def _keep_launches(
    launches: list[Group], crashes: list[Group], n_records: int
) -> tuple[list[Group], list[Group]]:
    kept: list[Group] = []
    dropped: list[Group] = []
    for g in launches:
        weak = all(i.data["strength"] == "weak" for i in g.items)
        if weak and not _records_follow(g, crashes, n_records):
            dropped.append(g)
        else:
            kept.append(g)
    return kept, dropped


def _records_follow(g: Group, crashes: list[Group], n_records: int) -> bool:
    last = g.items[-1].line
    nxt = next((c for c in crashes if c.items[0].line > last), None)
    return n_records > g.rc and (nxt is None or nxt.rc > g.rc)


def _restart(g: Group, name: str, rec_steps: np.ndarray) -> Restart:
    strong = [i for i in g.items if i.data["strength"] != "weak"]
    first = (strong or g.items)[0]
    best = min(g.items, key=lambda i: _LAUNCH_TEXT_ORDER[i.data["strength"]])
    resumes = [i.data["resume_step"] for i in g.items if i.data["strength"] == "load"]
    resumes = [r for r in resumes if r is not None]
    resume = resumes[-1] if resumes else (0 if best.data["strength"] == "fresh" else None)
    timed = any(i.data.get("timer") for i in g.items)
    if resume is None and timed and g.rc < len(rec_steps) and rec_steps[g.rc] > 1:
        # a checkpoint loaded (its timer) and no step said: resumed before the next record
        resume = int(rec_steps[g.rc]) - 1
    when = next((i.time for i in g.items if i.time is not None), None)
    return Restart(
        resume_step=resume,
        source=Source(file=name, line=first.line),
        text=best.text,
        time=when,
        assumed_tz="UTC" if when else None,
    )


def _failure(g: Group, name: str) -> HardwareFailure:
    top = min(g.items, key=lambda i: i.data["rank"])
    node = next((i.data["node"] for i in g.items if i.data["node"]), None)
    return HardwareFailure(
        cause=top.data["cause"],
        node=node,
        source=Source(file=name, line=top.line),
        text=top.text,
        time=top.time,
        assumed_tz="UTC" if top.time else None,
    )


def _saves(items: list[Item], name: str) -> list[EventBase]:
    """One event per checkpoint save: Megatron's 'saving' and 'successfully saved'
    lines, DeepSpeed's own line and the save timer join the save they belong to."""
    out: list[CheckpointSave] = []
    cur: CheckpointSave | None = None
    cur_rc = -1
    for it in items:
        if cur is not None and cur_rc != it.rc:
            cur = None
        if it.cat == "save_time":
            target = cur or (out[-1] if out and cur_rc == it.rc else None)
            if target is None:
                target = _new_save(it, name, None, None)
                out.append(target)
                cur, cur_rc = target, it.rc
            if target.save_time_s is None:
                target.save_time_s = it.data["seconds"]
            continue
        step, path = it.data["step"], it.data["path"]
        fits = cur is not None and (cur.step is None or step is None or cur.step == step)
        if it.data["what"] == "start" or not fits:
            cur = _new_save(it, name, step, path)
            cur_rc = it.rc
            out.append(cur)
        elif cur is not None:
            cur.step = cur.step if cur.step is not None else step
            cur.path = cur.path or path
    return list(out)


def _new_save(it: Item, name: str, step: int | None, path: str | None) -> CheckpointSave:
    return CheckpointSave(
        step=step,
        path=path,
        source=Source(file=name, line=it.line),
        text=it.text,
        time=it.time,
        assumed_tz="UTC" if it.time else None,
    )


def _validations(items: list[Item], name: str) -> list[EventBase]:
    out: list[EventBase] = []
    last: tuple | None = None
    for it in items:
        key = (it.rc, it.data["step"], it.data["split"], tuple(it.data["values"].items()))
        if key == last:
            continue  # the same block printed by another rank
        last = key
        out.append(
            Validation(
                step=it.data["step"],
                split=it.data["split"],
                values=it.data["values"],
                source=Source(file=name, line=it.line),
                text=it.text,
                time=it.time,
                assumed_tz="UTC" if it.time else None,
            )
        )
    return out


def _overflows(
    items: list[Item],
    rec_lines: np.ndarray,
    rec_steps: np.ndarray,
    launch_lines: list[int],
    name: str,
) -> list[EventBase]:
    """One event per skipped step (other ranks' copies left out; the lines one overflow
    prints joined). The step is the one printed, else the next record's (the step being
    skipped), else the one after the previous record."""
    out: list[OverflowSkip] = []
    parts: set[str] = set()
    cur_rc = -1
    marks = np.array(launch_lines, dtype=np.int64)
    for it in items:
        d = it.data
        if d["rank"] != 0:
            continue
        cur = out[-1] if out else None
        clash = cur is not None and None not in (cur.step, d["step"]) and cur.step != d["step"]
        if cur is None or cur_rc != it.rc or d["what"] in parts or clash:
            cur = OverflowSkip(
                source=Source(file=name, line=it.line),
                text=it.text,
                time=it.time,
                assumed_tz="UTC" if it.time else None,
            )
            out.append(cur)
            parts, cur_rc = set(), it.rc
        parts.add(d["what"])
        cur.step = cur.step if cur.step is not None else d["step"]
        cur.attempted_scale = cur.attempted_scale or d["attempted"]
        cur.new_scale = cur.new_scale or d["new"]
    for ev in out:
        if ev.step is None:
            ev.step, ev.step_source = _skipped_step(ev, rec_lines, rec_steps, marks)
    return list(out)


def _skipped_step(
    ev: OverflowSkip, rec_lines: np.ndarray, rec_steps: np.ndarray, marks: np.ndarray
) -> tuple[int | None, str | None]:
    line = ev.source.line if ev.source and ev.source.line else 0
    nxt = int(np.searchsorted(rec_lines, line))
    if nxt < len(rec_lines) and rec_steps[nxt] >= 0:
        between = np.searchsorted(marks, rec_lines[nxt]) - np.searchsorted(marks, line)
        if between == 0:
            return int(rec_steps[nxt]), "record"
    if nxt > 0 and rec_steps[nxt - 1] >= 0:
        return int(rec_steps[nxt - 1]) + 1, "record"
    return None, None
