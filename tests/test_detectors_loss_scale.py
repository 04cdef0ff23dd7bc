"""loss_scale_collapse: halvings within a window, the minimum scale, the skip rate."""

import numpy as np
import polars as pl

from logbook.detectors import DETECTORS, build_context
from logbook.detectors._config import build_config
from logbook.run import Run
from logbook.schema import Restart

COLLAPSE = DETECTORS["loss_scale_collapse"]


def run_of(scale, skipped=None, first_step=1, events=()) -> Run:
    n = len(scale)
    cols = {"step": np.arange(first_step, first_step + n), "loss_scale": np.asarray(scale, float)}
    if skipped is not None:
        cols["skipped"] = np.asarray(skipped, dtype=np.int64)
    return Run(metrics=pl.DataFrame(cols), events=list(events))


def found(run, cfg=None):
    fs = COLLAPSE(build_context(run), cfg)
    return [(f.kind, f.severity, f.step, f.start_step, f.end_step, f.score) for f in fs]


def sawtooth(n=5000) -> np.ndarray:
    """Start-up from 2**32, then doubling every 1000 quiet steps and a halving after."""
    level = np.full(n, 16.0)
    level[:16] = 32 - np.arange(1, 17)
    for k in range(1, n // 1000 + 1):
        level[1000 * k :] += 1
        level[1000 * k + 300 :] -= 1
    return 2.0**level


def test_healthy_sawtooth_and_startup_calibration_are_quiet():
    assert found(run_of(sawtooth())) == []


def test_three_halvings_within_the_window():
    scale = np.full(3000, 65536.0)
    for at in (1850, 1870, 1890):
        scale[at - 1 :] /= 2
    assert found(run_of(scale)) == [("loss_scale_collapse", "warning", 1890, 1850, 1890, 3.0)]
    scale[1499:] /= 2  # one more halving, 350 steps earlier: four within the window
    assert found(run_of(scale)) == [("loss_scale_collapse", "warning", 1870, 1500, 1890, 4.0)]
    scale = np.full(3000, 65536.0)
    for at in (1000, 1600, 2200):  # three halvings, but 600 steps apart
        scale[at - 1 :] /= 2
    assert found(run_of(scale)) == []


def test_two_halvings_are_only_a_precursor_candidate():
    scale = np.full(3000, 65536.0)
    for at in (1850, 1890):
        scale[at - 1 :] /= 2
    fs = COLLAPSE(build_context(run_of(scale)))
    assert [(f.kind, f.severity, f.start_step, f.evidence["precursor_only"]) for f in fs] == [
        ("loss_scale_drop", "info", 1850, True)
    ]


def test_reaching_the_minimum_is_critical():
    scale = sawtooth()
    scale[2999:] = 1.0
    (f,) = COLLAPSE(build_context(run_of(scale)))
    assert (f.severity, f.start_step, f.evidence["min_scale_reached"]) == ("critical", 3000, True)


def test_skip_rate():
    skipped = np.zeros(3000, dtype=int)
    skipped[2000:2400:10] = 1  # 40 skips in 400 steps: 8% of a 500-step window
    scale = np.full(3000, 65536.0)
    got = found(run_of(scale, skipped))
    # fires at the 25th skip within 500 steps (5%), starts at the first skip
    assert [(k, s, step, start) for k, s, step, start, _, _ in got] == [
        ("loss_scale_collapse", "warning", 2241, 2001)
    ]
    cfg = build_config(None, ["loss_scale_collapse.max_skip_rate=0.1"])["loss_scale_collapse"]
    assert found(run_of(scale, skipped), cfg) == []


def test_bf16_constant_single_null():
    assert found(run_of(np.full(100, 65536.0))) == []
    assert found(run_of([65536.0])) == []
    assert found(Run(metrics=pl.DataFrame({"step": [1, 2], "loss": [2.0, 2.0]}))) == []
    null = pl.DataFrame(
        {"step": [1, 2, 3], "loss_scale": [None, None, None]},
        schema_overrides={"loss_scale": pl.Float64},
    )
    assert found(Run(metrics=null)) == []


def test_scale_one_throughout_is_bf16_not_a_collapse():
    # Megatron prints `loss scale: 1.0` on every record of a bf16 run
    assert found(run_of(np.ones(300), first_step=480)) == []
    # at 1.0 from the first record, but iterations are being skipped: a collapse
    skipped = np.zeros(300, dtype=int)
    skipped[10:40] = 1
    got = found(run_of(np.ones(300), skipped, first_step=480))
    assert [(k, s, start) for k, s, _, start, _, _ in got] == [
        ("loss_scale_collapse", "critical", 490)
    ]


def test_resumed_run_is_not_in_startup_and_restart_is_segment_aware():
    # a run resumed at step 5001: no start-up exemption, and the collapse is measured
    # against the scale in force
    scale = np.full(2000, 2.0**17)
    scale[500:] = 2.0**13
    assert found(run_of(scale, first_step=5001)) == [
        ("loss_scale_collapse", "warning", 5501, 5501, 5501, 4.0)
    ]
    # a collapse in steps that a restart recomputed is reported with its segment
    a = np.full(800, 65536.0)
    a[700:] = 4096.0
    df = pl.DataFrame(
        {
            "step": np.r_[np.arange(1, 801), np.arange(601, 1201)],
            "segment": np.r_[np.zeros(800, int), np.ones(600, int)],
            "loss_scale": np.r_[a, np.full(600, 65536.0)],
        }
    )
    run = Run(metrics=df, events=[Restart(step=601, segment=1, resume_step=600)])
    (f,) = COLLAPSE(build_context(run))
    assert (f.start_step, f.segment, f.evidence["superseded"]) == (701, 0, True)
