"""What every detector shares: the config base, the registry entry and finding helpers.

A detector is a pure function ``(Context, Config) -> list[Finding]``: the same run and
config give the same findings, in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from logbook.detectors._frame import Context
from logbook.schema import Finding, Severity

SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}


class DetectorConfig(BaseModel):
    """Thresholds of one detector. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(True, description="Run this detector.")


@dataclass(frozen=True, kw_only=True)
class Detector:
    """A registry entry: the detector's name, config model, function and documentation."""

    name: str
    config: type[DetectorConfig]
    fn: Callable[[Context, Any], list[Finding]]
    kinds: tuple[str, ...]
    doc: str
    defaults: dict[str, Any] = field(default_factory=dict)

    def make_config(self, overrides: dict[str, Any] | None = None) -> DetectorConfig:
        """The config with this entry's defaults, then ``overrides``, applied."""
        return self.config(**{**self.defaults, **(overrides or {})})

    def __call__(self, ctx: Context, cfg: DetectorConfig | None = None) -> list[Finding]:
        cfg = cfg or self.make_config()
        return self.fn(ctx, cfg) if cfg.enabled else []


def finding(
    kind: str,
    detector: str,
    severity: Severity,
    *,
    step: int | None,
    start_step: int | None,
    end_step: int | None,
    score: float | None,
    message: str,
    segment: int = 0,
    evidence: dict[str, Any] | None = None,
) -> Finding:
    """A finding with rounded score and evidence (stable output)."""
    ev = {k: _round(v) for k, v in (evidence or {}).items() if v is not None}
    return Finding(
        kind=kind,
        detector=detector,
        severity=severity,
        step=step,
        start_step=start_step,
        end_step=end_step,
        score=_round(score),
        message=message,
        segment=segment,
        evidence=ev,
    )


def _round(v: Any) -> Any:
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        return float(f"{v:.6g}")
    return v


def fmt(v: float | None) -> str:
    """A number for a message: 4 significant digits."""
    if v is None:
        return "?"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.3e}"
    return f"{v:.4g}"


EXP_MAX = 700.0  # log-ratios beyond this are damaged values: the ratio is capped at e^700


def capped_exp(x: float) -> float:
    """``exp(x)`` that never overflows (a loss of 1e300 against 2.0 is a ratio, not an
    error): capped at ``e^EXP_MAX``; NaN stays NaN."""
    return math.exp(min(float(x), EXP_MAX)) if x == x else float("nan")
