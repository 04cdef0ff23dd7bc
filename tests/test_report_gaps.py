"""Steps a log does not hold are drawn as gaps, not as lines across them."""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.report.downsample import broken_at_gaps, lineage_series


def test_a_gap_of_many_intervals_breaks_the_line():
    steps = np.array([10, 20, 30, 40, 50, 1000, 1010, 1020])
    x, y = broken_at_gaps(steps, steps * 0.5, steps)
    assert np.isnan(x).sum() == 1 and int(np.flatnonzero(np.isnan(x))[0]) == 5
    assert x[4] == 50 and x[6] == 1000


def test_an_even_log_and_short_ones_are_left_alone():
    steps = np.arange(0, 1000, 10)
    x, y = broken_at_gaps(steps, steps * 1.0, steps)
    assert not np.isnan(x).any() and x.size == steps.size
    two = np.array([1, 500])
    assert broken_at_gaps(two, two * 1.0, two)[0].tolist() == [1, 500]


def test_lineage_series_breaks_at_the_gap_and_between_lineages():
    frame = pl.DataFrame(
        {
            "step": [1, 2, 3, 4, 5, 300, 301, 302, 10, 11, 12],
            "loss": [5.0, 4.9, 4.8, 4.7, 4.6, 3.0, 2.9, 2.8, 6.0, 6.1, 6.2],
            "lineage": [0] * 8 + [1] * 3,
        }
    )
    x, y = lineage_series(frame, "loss")
    gaps = np.flatnonzero(np.isnan(x)).tolist()
    assert gaps == [5, 9]  # the absent steps 6..299, then the next lineage
    assert x[:5].tolist() == [1, 2, 3, 4, 5] and x[6:9].tolist() == [300, 301, 302]


def test_goodput_without_timestamps_is_told_as_a_bound(tmp_path):
    from pathlib import Path

    import parsers
    from logbook.detectors import detect
    from logbook.report import build_report
    from logbook.report.document import glance

    log = Path(__file__).resolve().parents[1] / "fixtures" / "megatron" / "spike_restart.log"
    run = parsers.read_log(log)
    report = build_report(run, detect(run), figures=False)
    assert glance(report).endswith(
        "1 restart(s), 1 after a crash, costing 38.6 s; goodput at most 71.71% "
        "(no timestamps: an upper bound)."
    )


def test_a_thousand_checkpoint_saves_are_thinned_to_ticks_that_stay_apart():
    from logbook.report.figures import MAX_TICKS, thinned

    saves = np.arange(1000, 1_000_001, 1000)
    ticks = thinned(saves, MAX_TICKS)
    assert ticks.size == MAX_TICKS and ticks[0] == 1000 and ticks[-1] == 1_000_000
    assert np.all(np.diff(ticks) > 0)
    assert thinned(saves[:10], MAX_TICKS).tolist() == saves[:10].tolist()
