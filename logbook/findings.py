"""``Findings``: what the detectors found in a run, as a list with a table form.

``Run.detect()`` returns one; it is a plain ``list`` of :class:`~logbook.schema.Finding`
(so everything that takes the list keeps working) with a polars form
(``to_frame()``, and ``.to_pandas()`` from there) and a few views a notebook wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from logbook.schema import Finding

if TYPE_CHECKING:
    import polars as pl

SEVERITIES = ("info", "warning", "critical")  # in rising order

# One row per finding; ``evidence`` (a free-form dict) as a JSON string, so that the
# frame writes to CSV and Parquet as it is.
FRAME_SCHEMA: dict[str, str] = {
    "kind": "String",
    "detector": "String",
    "severity": "String",
    "step": "Int64",
    "start_step": "Int64",
    "end_step": "Int64",
    "score": "Float64",
    "message": "String",
    "run": "String",
    "segment": "Int64",
    "id": "String",
    "precedes": "String",
    "lead_steps": "Int64",
    "evidence": "String",
}


def frame_of(rows: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """Finding rows (their JSON form, ``evidence`` a dict) as a frame of ``FRAME_SCHEMA``."""
    import polars as pl

    schema = {name: getattr(pl, dtype) for name, dtype in FRAME_SCHEMA.items()}
    table = [
        {
            **{c: r.get(c) for c in FRAME_SCHEMA if c != "evidence"},
            "evidence": json.dumps(r.get("evidence") or {}, default=str),
        }
        for r in rows
    ]
    return pl.DataFrame(table, schema=schema)


class Findings(list[Finding]):
    """The findings of a run, in step order."""

    def to_frame(self) -> pl.DataFrame:
        """One row per finding (polars; ``.to_pandas()`` for pandas): kind, detector,
        severity, steps, score, message, run, segment, id, the finding it precedes and
        its lead in steps, and the evidence as a JSON string."""
        return frame_of(f.model_dump(mode="json") for f in self)

    def at_least(self, severity: str) -> Findings:
        """The findings of ``severity`` or worse."""
        if severity not in SEVERITIES:
            raise ValueError(f"severity {severity!r}: use one of {', '.join(SEVERITIES)}")
        floor = SEVERITIES.index(severity)
        return Findings(f for f in self if SEVERITIES.index(f.severity) >= floor)

    def of(self, *kinds: str) -> Findings:
        """The findings of these kinds (or detectors)."""
        return Findings(f for f in self if f.kind in kinds or f.detector in kinds)

    @property
    def worst(self) -> str | None:
        """The highest severity found, or None when nothing was."""
        if not self:
            return None
        return max((f.severity for f in self), key=SEVERITIES.index)

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{sum(f.severity == s for f in self)} {s}" for s in reversed(SEVERITIES)
        )
        return f"Findings({len(self)}: {counts})"
