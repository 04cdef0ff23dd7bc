"""The ``logbook/1`` schema: canonical metric columns and the event models.

Metrics are one wide polars frame, one row per logged training record. Events are
pydantic models, a discriminated union on ``kind``; detector findings are events too.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import polars as pl
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_serializer,
    field_validator,
)

SCHEMA_VERSION = "logbook/1"

# Canonical metric columns, in display order. Absent metrics are null, never 0.
METRIC_COLUMNS: dict[str, pl.DataType] = {
    "step": pl.Int64(),
    "segment": pl.Int32(),
    "time": pl.Datetime("us", "UTC"),
    "source": pl.Int32(),  # index into RunMeta.sources: which file the record came from
    "line": pl.Int64(),
    "loss": pl.Float64(),
    "lr": pl.Float64(),
    "grad_norm": pl.Float64(),
    "loss_scale": pl.Float64(),
    "skipped": pl.Int64(),
    "nan_count": pl.Int64(),
    "samples": pl.Int64(),
    "tokens": pl.Int64(),
    "batch_size": pl.Int64(),
    "step_time_s": pl.Float64(),
    "act_norm": pl.Float64(),
    "param_norm": pl.Float64(),
    "attn_logit_max": pl.Float64(),
    "logz": pl.Float64(),
}

# Columns every metrics frame has (provenance and position), even when all null.
CORE_COLUMNS = ("step", "segment", "time", "source", "line")

# Metric-name constants for detectors and reports.
LOSS, LR, GRAD_NORM, LOSS_SCALE = "loss", "lr", "grad_norm", "loss_scale"
ACT_NORM, PARAM_NORM, ATTN_LOGIT_MAX, LOGZ = "act_norm", "param_norm", "attn_logit_max", "logz"

Severity = Literal["info", "warning", "critical"]


class Source(BaseModel):
    """Where an event was read: file and 1-based line."""

    model_config = ConfigDict(extra="forbid")
    file: str | None = None
    line: int | None = None


class EventBase(BaseModel):
    """Fields every event has."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    step: int | None = None
    time: datetime | None = None
    segment: int = 0
    run: str | None = None
    source: Source | None = None
    text: str | None = None  # the original line or sentence, where there is one
    # where ``step`` came from when it was not printed with the event: "time" (placed
    # by the metric log's time->step mapping), "text" (stated in prose), "record"
    step_source: str | None = None
    assumed_tz: str | None = None  # the zone assumed for a time written without one
    parent_run: str | None = None  # the run this event's run continues (lineage)

    @field_validator("time")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        if v is None:
            return None
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    @field_serializer("time")
    def _iso(self, v: datetime | None) -> str | None:
        return None if v is None else v.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


class Restart(EventBase):
    """A new launch of the job: training resumes at ``resume_step`` + 1."""

    kind: Literal["restart"] = "restart"
    resume_step: int | None = None
    last_step_before: int | None = None
    lost_steps: int | None = None  # steps computed before the restart and computed again
    gap_s: float | None = None  # wall time from the last record before to the first after
    cause: str | None = None  # crash evidence seen before it (ecc, oom, nccl_timeout, ...)


class LrChange(EventBase):
    kind: Literal["lr_change"] = "lr_change"
    old: float | None = None
    new: float | None = None
    manual: bool | None = None  # True: set by hand (override, relaunch); False: schedule
    factor: float | None = None  # new / old, where only the ratio is known ("by 10%")


class LossScaleChange(EventBase):
    kind: Literal["loss_scale_change"] = "loss_scale_change"
    old: float | None = None
    new: float | None = None


class OverflowSkip(EventBase):
    """Iterations skipped because the fp16 gradients overflowed."""

    kind: Literal["overflow_skip"] = "overflow_skip"
    count: int = 1
    attempted_scale: float | None = None
    new_scale: float | None = None


class Nonfinite(EventBase):
    """A NaN/Inf value, a record whose loss field is missing (Megatron's NaN step), or
    a ``null`` written for it (JSON has no NaN)."""

    kind: Literal["nonfinite"] = "nonfinite"
    metric: str = "loss"
    value: Literal["nan", "inf", "-inf", "missing", "null"] = "nan"  # null: JSON null


class CheckpointSave(EventBase):
    kind: Literal["checkpoint_save"] = "checkpoint_save"
    path: str | None = None
    save_time_s: float | None = None


class Validation(EventBase):
    kind: Literal["validation"] = "validation"
    split: str | None = None
    values: dict[str, float | None] = Field(default_factory=dict)


class HardwareFailure(EventBase):
    kind: Literal["hardware_failure"] = "hardware_failure"
    cause: str = "unknown"  # ecc, cuda_error, nccl_timeout, oom, sigterm, bus_error, ...
    node: str | None = None


class ConfigChange(EventBase):
    kind: Literal["config_change"] = "config_change"
    key: str
    old: str | float | None = None
    new: str | float | None = None


class DataSkip(EventBase):
    kind: Literal["data_skip"] = "data_skip"
    start_step: int | None = None
    end_step: int | None = None


class Note(EventBase):
    kind: Literal["note"] = "note"


class Finding(EventBase):
    """A detector's result. ``kind`` names what was found (``loss_spike``, ...)."""

    detector: str
    severity: Severity = "warning"
    start_step: int | None = None
    end_step: int | None = None
    score: float | None = None
    message: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    precedes: str | None = None  # id of the finding this one is a precursor of
    lead_steps: int | None = None


EVENT_MODELS: dict[str, type[EventBase]] = {
    m.model_fields["kind"].default: m
    for m in (
        Restart,
        LrChange,
        LossScaleChange,
        OverflowSkip,
        Nonfinite,
        CheckpointSave,
        Validation,
        HardwareFailure,
        ConfigChange,
        DataSkip,
        Note,
    )
}


def _event_tag(v: Any) -> str:
    kind = v.get("kind") if isinstance(v, dict) else getattr(v, "kind", None)
    return kind if kind in EVENT_MODELS else "finding"


Event = Annotated[
    Annotated[Restart, Tag("restart")]
    | Annotated[LrChange, Tag("lr_change")]
    | Annotated[LossScaleChange, Tag("loss_scale_change")]
    | Annotated[OverflowSkip, Tag("overflow_skip")]
    | Annotated[Nonfinite, Tag("nonfinite")]
    | Annotated[CheckpointSave, Tag("checkpoint_save")]
    | Annotated[Validation, Tag("validation")]
    | Annotated[HardwareFailure, Tag("hardware_failure")]
    | Annotated[ConfigChange, Tag("config_change")]
    | Annotated[DataSkip, Tag("data_skip")]
    | Annotated[Note, Tag("note")]
    | Annotated[Finding, Tag("finding")],
    Discriminator(_event_tag),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_from_dict(data: dict[str, Any]) -> EventBase:
    """Validate one event object (as read from JSON) into its model."""
    return EVENT_ADAPTER.validate_python(data)


def event_to_dict(event: EventBase) -> dict[str, Any]:
    """The JSON form of an event: unset optional fields left out."""
    return event.model_dump(mode="json", exclude_none=True)


def event_sort_key(event: EventBase) -> tuple:
    """Events in timeline order: segment, step, source line."""
    line = event.source.line if event.source and event.source.line is not None else -1
    return (event.segment, event.step if event.step is not None else -1, line, event.kind)
