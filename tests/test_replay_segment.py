"""`logbook replay segment`: a recorded segment mapped onto the small model."""

import json
from pathlib import Path

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from logbook import cli_replay
from logbook.errors import UsageError
from logbook.run import Run

torch = pytest.importorskip("torch")

from replay.config import tiny  # noqa: E402
from replay.interventions import Intervention, parse_variant  # noqa: E402
from replay.segment import plan_segment  # noqa: E402
from replay.segment_run import drive, to_small  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "replay" / "segment_run.jsonl"
CORPUS = ROOT.parent / "shared" / "corpus" / "logs"
TR8B = CORPUS / "bigscience_tr8b_104B_bnb6_lr_override.txt"


@pytest.fixture(scope="module")
def seg():
    return plan_segment(Run.read(FIXTURE), 400, 800, steps=40, warmup=10, peak_lr=0.1)


def test_fixture_mapping(seg):
    assert seg.recorded_peak_lr == 6e-4
    anchors, small = seg.mapping
    assert anchors.tolist() == [400, 500, 501, 510, 540, 600, 800]
    assert small.tolist() == [11, 20, 21, 22, 24, 30, 50]  # 510 pushed one step past 501
    first, second = seg.legs
    assert (first.segment, first.first, first.last, first.rewind_to) == (0, 1, 30, None)
    assert (second.segment, second.first, second.last, second.rewind_to) == (1, 21, 50, 20)
    assert len(first.lr) == 30 and len(second.lr) == 30
    # Small step 11 holds recorded steps 400 and 410 (the last one's LR, relative to the
    # peak); the warm-up ramps to it.
    m = Run.read(FIXTURE).metrics
    lr410 = m.filter(pl.col("step") == 410).get_column("lr").item()
    assert first.lr[10] == pytest.approx(0.1 * lr410 / 6e-4, rel=1e-12)
    assert first.lr[:10] == pytest.approx([first.lr[10] * k / 10 for k in range(1, 11)])
    assert second.lr[0] / first.lr[20] == pytest.approx(0.4873, abs=1e-4)  # the cut to 0.5x
    assert seg.items == [
        Intervention(kind="clip", value=0.5, start=21, segment=1),
        Intervention(kind="reset_opt", start=21, segment=1),
        Intervention(kind="skip", start=21, end=24, segment=1),
    ]
    assert seg.actions == [
        "rewind: relaunch at recorded step 510 resumes from step 500 (small step 30 back to 20)",
        "LR at the relaunch x0.4873 (recorded step 510, small step 21)",
        "clip 0.5 from recorded step 501 (small step 21)",
        "optimizer reset at recorded step 501 (small step 21)",
        "skip batches of recorded steps 501-540 (small steps 21-24)",
        "manual LR change 0.00037596 -> 0.00018798 at recorded step 501 (small step 21)",
    ]


def test_driving_the_recorded_actions(seg):
    cfg = tiny()
    run = drive(seg, cfg, "recorded", to_small(parse_variant("x=baseline")[1], seg), "t")
    m = run.metrics
    first = m.filter(pl.col("segment") == 0).get_column("step").to_list()
    second = m.filter(pl.col("segment") == 1).get_column("step").to_list()
    assert first == list(range(1, 31))  # the first launch trains through 21-24
    assert second == list(range(25, 51))  # the relaunch skips the batches of 21-24
    (restart,) = run.events_of("restart")
    assert (restart.step, restart.resume_step, restart.last_step_before) == (21, 20, 30)
    assert restart.lost_steps == 10
    lr1 = m.filter(pl.col("segment") == 1).get_column("lr").to_list()
    assert lr1 == pytest.approx(seg.legs[1].lr[4:], rel=1e-12)
    keys = sorted((e.key, e.step, e.segment) for e in run.events_of("config_change"))
    assert keys == [("clip", 21, 1), ("optimizer_state", 21, 1)]
    # The trajectory keeps what survived the rewind.
    # The trajectory keeps the last launch's record of each step (21-24: the first's).
    traj = run.trajectory()
    assert traj.height == 50 and traj.get_column("segment").to_list()[20:25] == [0] * 4 + [1]


def test_no_actions_runs_one_launch_with_the_first_lr_shape(seg):
    run = drive(seg, tiny(), "no_actions", to_small(parse_variant("x=baseline")[1], seg), "t")
    m = run.metrics
    assert m.get_column("segment").unique().to_list() == [0]
    assert m.get_column("step").to_list() == list(range(1, 51))
    lr = m.get_column("lr").to_list()
    assert lr[:30] == pytest.approx(seg.legs[0].lr) and set(lr[30:]) == {lr[29]}
    assert run.events_of("restart") == [] and run.events_of("data_skip") == []


def test_variant_steps_are_recorded_steps(seg):
    plan = to_small(parse_variant("x=lr_scale:0.5@600,skip:500-540,clip:1.0")[1], seg)
    assert plan.items == [
        Intervention(kind="lr_scale", value=0.5, start=30),
        Intervention(kind="skip", start=20, end=24),
        Intervention(kind="clip", value=1.0, start=11),
    ]


def test_bad_windows():
    run = Run.read(FIXTURE)
    with pytest.raises(UsageError, match=r"no training records between steps 900 and 950 "):
        plan_segment(run, 900, 950)
    with pytest.raises(UsageError, match="--end 10 is before --start 20"):
        plan_segment(run, 20, 10)
    with pytest.raises(UsageError, match="need --steps >= 1"):
        plan_segment(run, 400, 800, steps=0)


def test_a_log_without_learning_rate_holds_the_peak():
    run = Run(metrics=pl.DataFrame({"step": [10, 20, 30], "loss": [3.0, 2.9, 2.8]}))
    seg = plan_segment(run, 10, 30, steps=6, warmup=2, peak_lr=0.05)
    assert seg.actions == ["the log has no learning rate: the small model holds its peak LR"]
    assert seg.legs[0].lr == [0.025, 0.05] + [0.05] * 6


def invoke(*args: str):
    a = typer.Typer()
    cli_replay.register(a)
    return CliRunner().invoke(a, ["replay", "segment", *args])


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("conf") / "tiny.json"
    cfg = tiny().to_dict()
    path.write_text(json.dumps({"model": cfg["model"], "data": cfg["data"]}))
    return path


def test_segment_cli_on_the_fixture(tiny_config, tmp_path):
    r = invoke(str(FIXTURE), "--start", "400", "--end", "800", "--steps", "20", "--warmup",
               "5", "--config", str(tiny_config), "--jobs", "1", "-o", str(tmp_path))  # fmt: skip
    assert r.exit_code == 0, r.output
    out = r.output.splitlines()
    assert out[0] == f"# replay segment: recorded steps 400..800 of {FIXTURE}"
    assert "recorded actions carried over:" in out
    assert "- rewind: relaunch at recorded step 510 resumes from step 500 " in r.output
    # the fixture's loss spike at 570 is not reproduced by the debug model: no verdicts
    assert (
        "fidelity: not reproduced: the real run's loss_spike at step 570 (40% into the "
        "segment, small step 14); the small model under the recorded actions stays stable "
        "in 1/1 seed(s)"
    ) in out
    assert any(line.startswith("no counterfactual verdicts: ") for line in out)
    assert [line for line in out if line.startswith(("stable", "unstable"))] == []
    fid = json.loads((tmp_path / "fidelity.json").read_text())
    assert (fid["real_step"], fid["real_small_step"], fid["reproduced"]) == (570, 14, False)
    assert fid["small_spike_steps"] == [None]
    data = json.loads((tmp_path / "results.json").read_text())
    assert [d["variant"] for d in data] == [
        "recorded",
        "no_actions",
        "half_lr",
        "clip_1",
        "qk_norm",
    ]
    assert data[0]["steps_lost"] == 5 + 3  # rewound steps (15 back to 10) plus skipped 11-13
    assert (tmp_path / "comparison.png").exists() and (tmp_path / "runs").is_dir()


@pytest.mark.skipif(not TR8B.exists(), reason="shared corpus not present")
def test_segment_on_a_corpus_log_with_an_lr_override(tiny_config):
    window = ["--start", "6502", "--end", "12001", "--steps", "20", "--warmup", "5"]
    r = invoke(str(TR8B), *window, "--config", str(tiny_config), "--jobs", "1",
               "--variant", "half=lr_scale:0.5")  # fmt: skip
    assert r.exit_code == 0, r.output
    relaunch = "- relaunch at recorded step 12000 resumes from step 11999 (no rewind: small step 13"
    assert relaunch in r.output
    assert "- LR at the relaunch x0.9738 (recorded step 12001, small step 27)" in r.output
    assert "stable under the recorded actions" in r.output or "unstable under the recorded" in (
        r.output
    )
    assert "| half | 1 |" in r.output


@pytest.mark.parametrize(
    ("lrs", "why"),
    [("0.1,x", "expected comma-separated numbers"), ("0.1,0", "expected LRs > 0")],
)
def test_calibration_sweep_is_checked(tiny_config, lrs, why):
    r = invoke(str(FIXTURE), "--start", "400", "--end", "800", "--calibrate", "--lrs", lrs,
               "--config", str(tiny_config))  # fmt: skip
    assert r.exit_code != 0 and isinstance(r.exception, UsageError)
    assert str(r.exception) == f"--lrs {lrs!r}: {why}"


def test_the_configured_peak_and_the_schedule_phase_come_from_the_start_up_arguments():
    from parsers import read_log
    from replay.segment_report import render

    run = read_log([ROOT / "fixtures" / "megatron" / "spike_restart.log"], None)
    seg = plan_segment(run, 1, 100, steps=50, warmup=10, peak_lr=0.1)
    assert seg.recorded_peak_lr == 3e-4 and seg.peak_configured
    head = render(seg, [], ["spike_restart.log"]).splitlines()[2:4]
    assert head[0].endswith(
        "recorded peak LR 0.0003 (the run's configured peak, from its start-up arguments) "
        "-> small-model LR 0.1; 2 launch(es) in the window"
    )
    assert head[1] == (
        "schedule: steps 1..100 are 0.2%-20.0% of the planned 500 iterations; inside the "
        "warm-up of 20 iterations; cosine decay"
    )
    # without the dump: the largest LR of the log, said to be that
    seg = plan_segment(Run.read(FIXTURE), 400, 800, steps=40, warmup=10, peak_lr=0.1)
    assert not seg.peak_configured and seg.phase is None
    assert "(the largest LR in the log: the run's configured peak is not in it" in render(
        seg, [], ["x"]
    )
