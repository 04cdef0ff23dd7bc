"""What both trainer callbacks share: the detector, the reporting, the stop rule."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from logbook.live.detector import CONFIRM_RECORDS, SEVERITIES, LiveDetector
from logbook.schema import Finding

LOG = logging.getLogger("logbook.live")
_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "critical": logging.ERROR}


class Watcher:
    """The detector of one training run, fed step by step.

    ``stop_on``: the severity (``"warning"`` or ``"critical"``) at which training is to
    stop, or None to only report; ``on_finding``: called with each finding as it is
    reported (by default findings go to the ``logbook.live`` logger); ``config``,
    ``min_severity``, ``check_every``, ``confirm``: as :class:`~logbook.live.LiveDetector`
    takes them.
    """

    def __init__(
        self,
        stop_on: str | None = "critical",
        on_finding: Callable[[Finding], None] | None = None,
        config: dict | None = None,
        min_severity: str = "warning",
        check_every: int = 1,
        confirm: int = CONFIRM_RECORDS,
    ) -> None:
        if stop_on is not None and stop_on not in ("warning", "critical"):
            raise ValueError(f"stop_on {stop_on!r}: use 'warning', 'critical' or None")
        lowest = min_severity if stop_on is None else min(min_severity, stop_on, key=_rank)
        self.detector = LiveDetector(
            config=config, min_severity=lowest, check_every=check_every, confirm=confirm
        )
        self.stop_on = stop_on
        self.min_severity = min_severity
        self.on_finding = on_finding
        self.findings: list[Finding] = []
        self.stopped_by: Finding | None = None  # the finding that stopped training

    def feed(self, record: Mapping[str, Any]) -> bool:
        """Take one logged step; whether training is to stop."""
        return self._report(self.detector.feed(record))

    def flush(self) -> None:
        """Training ended: what is still open is reported as it stands."""
        self._report(self.detector.flush())

    def _report(self, found: list[Finding]) -> bool:
        stop = False
        for f in found:
            if _rank(f.severity) >= _rank(self.min_severity):
                self.findings.append(f)
                if self.on_finding is not None:
                    self.on_finding(f)
                else:
                    LOG.log(
                        _LEVELS[f.severity], "logbook: %s at step %s: %s", f.kind, f.step, f.message
                    )
            if self.stop_on is not None and _rank(f.severity) >= _rank(self.stop_on):
                if self.stopped_by is None:
                    self.stopped_by = f
                    LOG.error("logbook: stopping training: %s at step %s", f.kind, f.step)
                stop = True
        return stop


def scalars(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that are single numbers (a 0-d tensor, a numpy scalar, a float)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if hasattr(v, "numel") and callable(v.numel):
            if v.numel() != 1:
                continue
            v = v.detach().float().item()
        elif hasattr(v, "item") and callable(v.item) and getattr(v, "size", 1) == 1:
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        out[str(k)] = v if math.isfinite(v) else float(v)
    return out


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity)
