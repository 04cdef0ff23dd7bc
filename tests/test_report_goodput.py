import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from logbook.report.goodput import account, median_step_time, modelled_goodput
from logbook.run import Run
from logbook.schema import CheckpointSave, Restart

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "incident_run.jsonl"


@pytest.fixture(scope="module")
def fixture_run() -> Run:
    return Run.read(FIXTURE)


def test_fixture_goodput_equals_the_hand_calculation(fixture_run):
    g = account(fixture_run)
    # The fixture: 2.0 s per step, a 30 s save every 100 steps, launches of steps
    # 1..730, 701..1120 and 1001..1450; an ECC crash (gap 1200 s, 30 steps recomputed)
    # and a deliberate rewind (gap 600 s, 120 steps recomputed).
    tau, delta = 2.0, 30.0
    records = 730 + 420 + 450
    in_launch_pairs = records - 3  # consecutive records of one launch
    saves_between_records = 7 + 4 + 4  # saves at 100..700, 800..1100, 1100..1400
    wall = in_launch_pairs * tau + saves_between_records * delta + 1200 + 600
    assert wall == 5444.0
    gaps, recompute, saves = 1200 + 600, (30 + 120) * tau, 15 * delta
    useful = wall - gaps - recompute - saves
    assert useful == 2894.0
    assert g.step_time_s == tau
    assert g.wall_s == wall and not g.wall_estimated
    assert (g.gaps_s, g.recompute_s, g.saves, g.saves_s) == (gaps, recompute, 15, saves)
    assert g.save_time_s == delta
    assert g.useful_s == useful
    assert g.goodput == pytest.approx(useful / wall, rel=1e-12)  # 53.16%
    # one failure (the ECC crash); the rewind was deliberate
    assert g.failures == 1
    assert g.mtbf_s == wall
    assert g.interval_steps == 100 and g.interval_s == 200.0
    yd = math.sqrt(2 * delta * wall)
    assert g.young_daly_s == pytest.approx(yd, rel=1e-12)  # 571.5 s
    assert g.young_daly_steps == pytest.approx(yd / tau, rel=1e-12)
    deliberate = 600 + 120 * tau

    def modelled(interval: float) -> float:
        return useful / (useful + delta * useful / interval + (1200 + interval / 2) + deliberate)

    assert g.modelled_actual == pytest.approx(modelled(200.0), rel=1e-12)  # 52.93%
    assert g.modelled_optimal == pytest.approx(modelled(yd), rel=1e-12)  # 53.88%
    assert g.modelled_optimal > g.modelled_actual
    assert g.notes == []


def test_fixture_restart_rows(fixture_run):
    g = account(fixture_run)
    rows = [(r.step, r.segment, r.resume_step, r.lost_steps, r.gap_s, r.cause) for r in g.restarts]
    assert rows == [(701, 1, 700, 30, 1200.0, "ecc"), (1001, 2, 1000, 120, 600.0, None)]
    assert [r.recompute_s for r in g.restarts] == [60.0, 240.0]
    assert [r.cost_s for r in g.restarts] == [1260.0, 840.0]
    assert [r.failure for r in g.restarts] == [True, False]
    assert [r.source.line for r in g.restarts] == [1610, 1623]


def _run(times: bool, restarts: list[Restart], saves: list[CheckpointSave]) -> Run:
    steps = list(range(1, 101))
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    data = {"step": steps, "segment": [0] * 100, "loss": [2.0] * 100, "step_time_s": [3.0] * 100}
    if times:
        data["time"] = [t0 + timedelta(seconds=3 * s) for s in steps]
    return Run(metrics=pl.DataFrame(data), events=[*restarts, *saves])


def test_no_failure_gives_no_mtbf_or_young_daly():
    g = account(_run(True, [], [CheckpointSave(step=50, save_time_s=10.0)]))
    assert g.failures == 0 and g.mtbf_s is None and g.young_daly_s is None
    assert g.wall_s == 297.0
    assert g.useful_s == 287.0
    assert "no failure observed (no restart with crash evidence): no MTBF" in g.notes
    assert "fewer than two checkpoint saves in one launch: no checkpoint interval" in g.notes


def test_without_timestamps_the_wall_time_is_estimated_and_unknown_gaps_noted():
    crash = Restart(step=60, segment=0, resume_step=59, lost_steps=0, cause="oom")
    saves = [CheckpointSave(step=s, save_time_s=5.0) for s in (20, 40)]
    g = account(_run(False, [crash], saves))
    assert g.wall_estimated
    assert g.wall_s == 99 * 3.0 + 2 * 5.0  # steps 1..100 at 3 s, plus two saves
    assert g.failures == 1 and g.mtbf_s == g.wall_s
    assert g.young_daly_s == pytest.approx(math.sqrt(2 * 5.0 * g.wall_s))
    assert g.notes[0].startswith("1 restart gap(s) unknown")


def test_no_save_time_means_no_young_daly():
    crash = Restart(step=60, segment=0, resume_step=59, gap_s=100.0, cause="ecc")
    g = account(_run(True, [crash], [CheckpointSave(step=s) for s in (20, 40)]))
    assert g.mtbf_s == 297.0 and g.young_daly_s is None
    assert g.interval_steps == 20.0 and g.interval_s == 60.0
    assert "no checkpoint save time in the log: no Young–Daly interval" in g.notes
    assert modelled_goodput(g, 60.0) is None


def test_median_step_time_from_timestamps_when_no_step_time_column():
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    m = pl.DataFrame(
        {
            "step": [10, 20, 30, 5, 15],
            "segment": [0, 0, 0, 1, 1],
            "time": [t0 + timedelta(seconds=s) for s in (0, 40, 80, 500, 560)],
        }
    )
    # 4 s/step within segment 0, 6 s/step within segment 1; the rewind is not a step time
    assert median_step_time(Run(metrics=m).metrics) == 4.0
    assert median_step_time(Run().metrics) is None
