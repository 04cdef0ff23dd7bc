"""``loss_spike``: the training loss jumps well above its recent level.

Fires when a loss record is at least ``min_ratio`` (1.25) times the median of the previous
``window`` (50) records (or of the last ``recent_records`` (10), when lower: a falling
loss) and ``z`` (6) robust noise deviations above it, in log space; the
finding gives the onset, the peak, the recovery (or "not recovered") and the magnitude
peak/baseline. Severity: critical when the peak is ``critical_ratio`` (2x) the baseline
or more, or the loss has not come back by the end of the run (or of the stretch a
restart overwrote); warning otherwise, and for a single record that was gone at the next
one (a bad batch rather than damage).

Stays quiet on: the warm-up descent (the loss falls below its rolling median, never
above), the slow downward trend, heavy-tailed noise (the noise scale is a median of
absolute differences; a spike needs ``min_records`` (2) records ``onset_z`` (4) deviations
up, or a lone record of ``single_record_ratio``, 2x, or of ``lone_min_ratio`` (1.3x) that
stands ``lone_z`` (8) deviations above a quiet baseline; a per-batch loss that is noisy
throughout, a small batch's in detection or a GAN, is judged by its own spread), the jump at
a restart or a gap in the log (the trajectory joins the resumed records to the
checkpoint's, the first ``restart_grace`` records after a restart, or after steps jumping
20 times the usual interval, need twice the deviation, and a new level from the first
record of a relaunch or after the gap is not a spike), constant input, and short history (with
fewer than ``min_history`` records before it, only a 2x jump counts, or a rise of
``early_ratio`` (1.3x) that one of the next two records holds: early in training the
loss falls), a loss that takes negative values (a signed objective: GRPO, PPO), and a
rise of one or two units of the values' print resolution (a loss rounded to 0.0001 near
zero going 0.0001 -> 0.0002 is rounding, not a 2x jump).
"""

from __future__ import annotations

from logbook.detectors._base import Detector
from logbook.detectors._frame import Context
from logbook.detectors._spike import SpikeConfig, detect_spikes
from logbook.schema import Finding

NAME = "loss_spike"


class Config(SpikeConfig):
    """Loss-spike thresholds: :class:`SpikeConfig`, with the rules for a single clear
    outlier, a falling loss and the first records switched on (see ``DEFAULTS``)."""


# a loss is steadier than a grad norm: a lone outlier far above a quiet baseline, a rise
# over a falling loss and an early rise count (grad norms are heavy-tailed and jump early)
DEFAULTS = {"lone_z": 8.0, "recent_records": 10, "early_ratio": 1.3}


def detect(ctx: Context, cfg: Config) -> list[Finding]:
    return detect_spikes(ctx, cfg, "loss_spike", NAME)


DETECTOR = Detector(
    name=NAME,
    config=Config,
    fn=detect,
    kinds=("loss_spike",),
    doc=__doc__ or "",
    defaults=DEFAULTS,
)
