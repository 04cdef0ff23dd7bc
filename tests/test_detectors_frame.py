"""The analysis frame: the trajectory, then each overwritten stretch after its context."""

from __future__ import annotations

import numpy as np
import polars as pl

from logbook.detectors import _frame, build_context
from logbook.run import Run


def _metrics(steps: list[int], segments: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "step": steps,
            "segment": segments,
            "loss": [float(i) for i in range(len(steps))],
        },
        schema={"step": pl.Int64, "segment": pl.Int32, "loss": pl.Float64},
    )


def test_trajectory_rows_agree_with_the_run_trajectory() -> None:
    # steps 1-6, a rewind to 4, steps 4-8, a rewind to 7, steps 7-9
    steps = [1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 7, 8, 9]
    segs = [0] * 6 + [1] * 5 + [2] * 3
    m = _metrics(steps, segs)
    traj, sup = _frame.trajectory_rows(m)
    assert traj.tolist() == [0, 1, 2, 6, 7, 8, 11, 12, 13]
    assert sup.tolist() == [3, 4, 5, 9, 10]
    assert m[traj].equals(Run(metrics=m).trajectory().select(m.columns))


def test_rows_out_of_launch_order_take_the_general_way() -> None:
    steps = [4, 5, 6, 1, 2, 3, 4, 5]
    segs = [1, 1, 1, 0, 0, 0, 0, 0]
    m = _metrics(steps, segs)
    traj, sup = _frame.trajectory_rows(m)
    assert traj.tolist() == [3, 4, 5, 0, 1, 2]
    assert sup.tolist() == [6, 7]
    assert m[traj].equals(Run(metrics=m).trajectory().select(m.columns))


def test_frame_holds_each_overwritten_stretch_after_its_context(monkeypatch) -> None:
    monkeypatch.setattr(_frame, "CONTEXT_RECORDS", 2)
    steps = [1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 7, 8, 9]
    segs = [0] * 6 + [1] * 5 + [2] * 3
    ctx = build_context(Run(metrics=_metrics(steps, segs)))
    f = ctx.frame
    assert f.get_column("step").to_list() == [1, 2, 3, 4, 5, 6, 7, 8, 9] + [2, 3, 4, 5, 6] + [
        5,
        6,
        7,
        8,
    ]
    assert f.get_column("lineage").to_list() == [0] * 9 + [1] * 5 + [2] * 4
    assert f.get_column("report").to_list() == [True] * 9 + [False, False, True, True, True] + [
        False,
        False,
        True,
        True,
    ]
    # the overwritten records keep their own values (loss = their row in the metrics)
    assert f.get_column("loss").to_list()[9:] == [1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 9.0, 10.0]
    assert f.get_column("segment").to_list()[9:] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert ctx.interval == 1
    assert f.n_chunks() == 1


def test_records_without_a_step_are_left_out() -> None:
    m = pl.DataFrame(
        {"step": [1, None, 2, 3], "segment": [0, 0, 0, 0], "loss": [1.0, 9.0, 2.0, 3.0]},
        schema={"step": pl.Int64, "segment": pl.Int32, "loss": pl.Float64},
    )
    f = build_context(Run(metrics=m)).frame
    assert f.get_column("loss").to_list() == [1.0, 2.0, 3.0]
    assert np.all(f.get_column("report").to_numpy())


def test_restart_age_counts_records_since_the_last_boundary_of_the_lineage() -> None:
    frame = pl.DataFrame(
        {"segment": [0, 0, 1, 1, 1, 2, 0, 0, 1], "lineage": [0, 0, 0, 0, 0, 0, 1, 1, 1]},
        schema={"segment": pl.Int32, "lineage": pl.Int32},
    )
    no = _frame.NO_RESTART
    ages = _frame._restart_age(frame).get_column("restart_age").to_list()
    assert ages == [no, no, 0, 1, 2, 0, no, no, 0]


def test_a_corrupt_huge_step_costs_no_memory_by_the_step_range() -> None:
    # one step of 10^12 (a flipped digit) in a run that rewinds: a lookup table over the
    # step range would ask for about 1 TB
    steps = [1, 2, 3, 10**12, 4, 2, 3, 4, 5, 2**62]
    m = pl.DataFrame({"step": steps, "segment": [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]})
    traj, dropped = _frame.trajectory_rows(m)
    assert [steps[i] for i in traj] == [1, 2, 3, 4, 5, 10**12, 2**62]
    assert sorted(dropped.tolist()) == [1, 2, 4]
