"""``grad_norm_spike``: the global gradient norm jumps far above its recent level.

Fires when a record is ``min_ratio`` (3x) the rolling median of the previous ``window``
(50) records and ``z`` (6) noise deviations above it: the same robust log-space detector
as ``loss_spike``, with thresholds for a much noisier metric (a single elevated record
needs ``single_record_ratio``, 5x; the noise scale is capped at ``max_noise``, 0.5, so an
explosive rise over a few records is not taken for noise).
Severity: critical when the peak reaches ``critical_ratio`` (20x) or the norm has not
come back by the end; warning otherwise, and for a single record gone at the next one.
A grad-norm spike before a loss spike is reported as its precursor.

Stays quiet on: the early fall of the gradient norm, its ordinary 2x wobble, constant
input (e.g. a norm printed as 0, which is not a measurement), missing values, and the
first records after a restart unless the jump is twice as significant.
"""

from __future__ import annotations

from logbook.detectors._base import Detector
from logbook.detectors._frame import Context
from logbook.detectors._spike import SpikeConfig, detect_spikes
from logbook.schema import Finding

NAME = "grad_norm_spike"
DEFAULTS = {
    "column": "grad_norm",
    "min_ratio": 3.0,
    "single_record_ratio": 5.0,
    "min_noise": 0.05,
    "max_noise": 0.5,
    "critical_ratio": 20.0,
}


class Config(SpikeConfig):
    """Grad-norm spike thresholds (see ``DEFAULTS`` for the values that differ)."""


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    return detect_spikes(ctx, cfg, "grad_norm_spike", NAME)


DETECTOR = Detector(
    name=NAME,
    config=Config,
    fn=detect,
    kinds=("grad_norm_spike",),
    doc=__doc__ or "",
    defaults=DEFAULTS,
)
