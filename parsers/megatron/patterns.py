"""Event lines of Megatron-family logs: what each one says, read one line at a time.

The patterns are used twice: joined into two regexes that pick the event lines out of
all lines (vectorized), and one by one, in the order below, to read each picked line.
"""

from __future__ import annotations

import re
from typing import Any

from parsers.megatron.fields import column_name
from parsers.megatron.lines import LOAD_TIMER
from parsers.reader.events import CRASH_CAUSES as SHARED_CAUSES

# Tried right after the line's prefixes.
LAUNCH_ANCHORED = [
    r"using world size: \d+",
    r"> initializing torch distributed",
    r"> initializing (?:tensor |pipeline )?model parallel with size",
    r"> setting random seeds to",
    r"Setting OMP_NUM_THREADS environment variable",
    r"done with setups? \.\.\.",  # pretrain(): once per launch, before its first step
    r"training \.\.\.\s*$",
    r"(?i:(?:after|post)[ -]?restart\w*|restart(?:ed|ing)?)\W*$",
]
EXCEPTION_ANCHORED = [
    r"Traceback \(most recent call last\)",
    r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt)(?::|\s*$)",
    r"terminate called after throwing",
    r"Exception in thread ",
]
# Found anywhere in the line.
VALIDATION = (
    # (Megatron-DeepSpeed: ``at iteration 2500 on 320-sample draw from validation set``)
    r"(?:validation|valid) loss at (?:iteration\s+(?P<step>\d+)"
    r"(?: on (?:\d+-sample draw from )?(?P<split>\w+) set)?"
    r"|the end of training for (?P<split2>\w+) data)\s*\|(?P<rest>.*)"
)
SAVE_PATTERNS = {
    "start": r"saving checkpoint at iteration\s+(?P<step>\d+) to (?P<path>\S+)",
    "done": r"successfully saved checkpoint (?:at|from) iteration\s+(?P<step>\d+) to (?P<path>\S+)",
    "deepspeed": r"Saving model checkpoint: (?P<path>\S+)",
    "ready": r"\[Torch\] Checkpoint (?P<path>\S+) is ready now",
}
# One overflow prints up to three lines (DeepSpeed: the iteration, the scale reduction,
# the skip); they make one event.
OVERFLOW_PATTERNS = {
    "skip": r"(?i:overflow!|overflow detected\.).*?(?:Rank (?P<rank>\d+) )?(?i:skipping step)\.?"
    r"(?:\s*Attempted loss scale: (?P<att>[-+\d.eE]+), reducing to (?P<new>[-+\d.eE]+))?",
    "apex": r"[Gg]radient overflow\.\s+Skipping step(?:, loss scaler \d+ reducing loss scale to "
    r"(?P<new>[-+\d.eE]+))?",
    "iter": r"Grad overflow on iteration (?P<step>\d+)",
    "reduce": r"Reducing dynamic loss scale from (?P<att>[-+\d.eE]+) to (?P<new>[-+\d.eE]+)",
}
LOAD_PATTERNS = [
    r"loading (?:universal )?checkpoint from (?P<path>\S+) at iteration (?P<step>\d+)",
    r"successfully loaded checkpoint from (?P<path>\S+?)(?:\s*\[[^\]]*\])? at iteration "
    r"(?P<step>\d+)",
    r"loading checkpoint: (?P<path>\S*global_step(?P<step>\d+)\S*)",
]
FRESH_PATTERNS = [
    r"could not find the metadata file",
    r"will not load any checkpoints and will start from random",
]
BANNER_ANYWHERE = [r"initializing model parallel cuda seeds", r"WORLD INFO DICT"]
# Crash evidence, most specific first: a crash's cause is the first one found (the shared
# list; an exception is told apart below, by where its line starts)
CRASH_CAUSES = [(c, p) for c, p in SHARED_CAUSES if c != "exception"]
NODE = r"ON (?P<node>\S+) CANCELLED|on (?:host|node) (?P<node2>[\w.-]+)"


def event_patterns() -> tuple[list[str], list[str]]:
    """(anchored, anywhere) regexes that select the event lines, for the classifier."""
    anchored = LAUNCH_ANCHORED + EXCEPTION_ANCHORED
    anywhere = (
        [VALIDATION]
        + list(SAVE_PATTERNS.values())
        + list(OVERFLOW_PATTERNS.values())
        + LOAD_PATTERNS
        + FRESH_PATTERNS
        + BANNER_ANYWHERE
        + [p for _, p in CRASH_CAUSES]
    )
    return anchored, anywhere


_C = re.compile
_SEPARATOR = _C(r"^\s*#\s*-{3,}")
_SAVE_TIMER = _C(r"save-checkpoint\W*:\s*\(?(?P<a>[\d.]+)(?:,\s*(?P<b>[\d.]+))?")
_LOAD_TIMER = _C(LOAD_TIMER)
_VALIDATION = _C(VALIDATION)
_SAVES = {k: _C(p) for k, p in SAVE_PATTERNS.items()}
_OVERFLOWS = {k: _C(p) for k, p in OVERFLOW_PATTERNS.items()}
_LOADS = [_C(p) for p in LOAD_PATTERNS]
_FRESH = [_C(p) for p in FRESH_PATTERNS]
_BANNERS = [_C(p) for p in LAUNCH_ANCHORED[:-1]]
_ANNOTATION = _C(LAUNCH_ANCHORED[-1])
_BANNERS_ANYWHERE = [_C(p) for p in BANNER_ANYWHERE]
_CAUSES = [(c, _C(p)) for c, p in CRASH_CAUSES]
_EXCEPTION = _C("(?:" + "|".join(EXCEPTION_ANCHORED) + ")")
_NODE = _C(NODE)
_GLOBAL_STEP = _C(r"global_step(\d+)")


def read_event_line(text: str, body: str) -> tuple[str, dict[str, Any]] | None:
    """What an event line says: (category, details), or None when no pattern reads it.

    Categories: launch (strength weak/strong, resume_step), save_time, save (what,
    step, path), validation (step, split, values), overflow, crash (cause, node).
    """
    if _SEPARATOR.match(text):
        return "launch", {"strength": "weak", "rank": 0}
    if m := _SAVE_TIMER.search(body):
        ms = float(m.group("b") or m.group("a"))
        return "save_time", {"seconds": round(ms / 1000.0, 6)}
    if _LOAD_TIMER.search(body):  # (its step: the next record's, see events._restart)
        return "launch", {"strength": "load", "resume_step": None, "timer": True}
    if m := _VALIDATION.search(body):
        return "validation", _validation(m)
    for what, rx in _SAVES.items():
        if m := rx.search(body):
            return "save", _save(what, m)
    for what, rx in _OVERFLOWS.items():
        if m := rx.search(body):
            return "overflow", _overflow(what, m)
    launch = _launch(body)
    if launch is not None:
        return "launch", launch
    return _crash(body)


def _validation(m: re.Match) -> dict[str, Any]:
    split = (m.group("split") or m.group("split2") or "valid").lower()
    split = "valid" if split in ("val", "valid", "validation") else split
    values: dict[str, float | None] = {}
    for piece in m.group("rest").split("|"):
        key, sep, raw = piece.partition(":")
        if not sep or not key.strip():
            continue
        name = _validation_key(key.strip())
        if name not in values:
            values[name] = _float(raw)
    step = m.group("step")
    return {"step": int(step) if step else None, "split": split, "values": values}


def _validation_key(key: str) -> str:
    ppl = key.endswith(" PPL")
    base = key[: -len(" PPL")] if ppl else key.removesuffix(" value")
    name = column_name(base.strip())
    if ppl:
        return "ppl" if name == "loss" else f"{name}_ppl"
    return name


def _float(raw: str) -> float | None:
    try:
        return float(raw.strip())
    except ValueError:
        return None


def _save(what: str, m: re.Match) -> dict[str, Any]:
    groups = m.groupdict()
    path = groups.get("path")
    step = groups.get("step")
    if step is None and path and (g := _GLOBAL_STEP.search(path)):
        step = g.group(1)
    if what == "ready":
        path = None
    return {"what": what, "step": int(step) if step else None, "path": path}


def _overflow(what: str, m: re.Match) -> dict[str, Any]:
    g = m.groupdict()
    return {
        "what": "skip" if what == "apex" else what,
        "rank": int(g["rank"]) if g.get("rank") else 0,
        "attempted": _float(g["att"]) if g.get("att") else None,
        "new": _float(g["new"]) if g.get("new") else None,
        "step": int(g["step"]) if g.get("step") else None,
    }


def _launch(body: str) -> dict[str, Any] | None:
    for rx in _LOADS:
        if m := rx.search(body):
            return {"strength": "load", "resume_step": int(m.group("step"))}
    if any(rx.search(body) for rx in _FRESH):
        return {"strength": "fresh", "resume_step": 0}
    if any(rx.match(body) for rx in _BANNERS) or any(rx.search(body) for rx in _BANNERS_ANYWHERE):
        return {"strength": "strong"}
    if _ANNOTATION.match(body):
        return {"strength": "weak"}
    return None


def _crash(body: str) -> tuple[str, dict[str, Any]] | None:
    cause = next((c for c, rx in _CAUSES if rx.search(body)), None)
    if cause is None and _EXCEPTION.match(body):
        cause = "exception"
    if cause is None:
        return None
    node = None
    if m := _NODE.search(body):
        node = m.group("node") or m.group("node2")
    return "crash", {"cause": cause, "node": node, "rank": CAUSE_RANK[cause]}


CAUSE_RANK = {c: i for i, (c, _) in enumerate(CRASH_CAUSES)} | {"exception": len(CRASH_CAUSES)}
