"""From found facts to events: every rule run over a text, duplicates dropped, and the
drafts turned into the schema's event models."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from logbook.schema import EVENT_MODELS, EventBase, Source
from parsers.chronicle import config as cfg
from parsers.chronicle import extract as ext
from parsers.chronicle.extract import Found


@dataclass
class Draft:
    """An event before it is validated: where, when, which run, what was written."""

    kind: str
    line: int
    fields: dict[str, Any] = field(default_factory=dict)
    time: datetime | None = None
    assumed_tz: str | None = None
    run: str | None = None
    text: str = ""
    step: int | None = None
    step_source: str | None = None


def extract(text: str, mode: str) -> list[Found]:
    """All facts in a text. ``mode``: ``entry`` (a logbook entry: settings written with a
    value are changes), ``prose``, or ``code`` (a command or pasted output: only script
    edits, crash messages and data-skip flags count)."""
    entry = mode == "entry"
    found: list[Found] = []
    if mode != "code":
        found += ext.restarts(text)
    found += ext.hardware(text)
    resume = next((f.fields.get("resume_step") for f in found if f.kind == "restart"), None)
    found += ext.data_skips(text, resume)
    if mode == "code":
        found += cfg.substitutions(text)
    else:
        found += cfg.lr_changes(text, entry) + cfg.config_changes(text, entry)
    return _dedupe(found)


def _dedupe(found: list[Found]) -> list[Found]:
    out: list[Found] = []
    seen: set[tuple] = set()
    for f in sorted(found, key=lambda f: f.pos):
        key = (f.kind, tuple(sorted((k, str(v)) for k, v in f.fields.items() if v is not None)))
        loose = (f.kind, f.fields.get("key"), str(f.fields.get("new")))
        valued = f.fields.get("new") is not None
        if (key in seen and (valued or f.kind != "lr_change")) or (valued and loose in seen):
            continue
        if f.kind == "data_skip" and not f.fields and any(o.kind == "data_skip" for o in out):
            continue
        seen.update({key, loose})
        out.append(f)
    return out


def place_step(d: Draft, stated: int | None) -> None:
    """The step the text gives the event: the resume step of a restart, the first
    skipped step, or a step written next to it (``At iteration 21680``)."""
    step = d.fields.get("resume_step") if d.kind == "restart" else None
    if d.kind == "data_skip":
        step = d.fields.get("start_step")
    step = step if step is not None else stated
    if step is not None:
        d.step, d.step_source = step, "text"


def to_events(drafts: list[Draft], file: str, lineage: dict[str, str]) -> list[EventBase]:
    """Validated events. Where the schema has a ``parent_run`` field, each event names
    the run its run continues (the lineage is in the run's metadata either way)."""
    out = []
    for d in drafts:
        model = EVENT_MODELS[d.kind]
        fields = {k: v for k, v in d.fields.items() if k in model.model_fields}
        if "parent_run" in model.model_fields and d.run in lineage:
            fields["parent_run"] = lineage[d.run]
        out.append(
            model(
                **fields,
                step=d.step,
                time=d.time,
                run=d.run,
                source=Source(file=file, line=d.line),
                text=d.text,
                step_source=d.step_source,
                assumed_tz=d.assumed_tz,
            )
        )
    return out
