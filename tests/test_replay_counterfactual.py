"""`logbook replay counterfactual`: variants x seeds from a checkpoint, table and figure."""

import json

import pytest
import typer
from typer.testing import CliRunner

from logbook import cli_replay
from logbook.errors import InputError, UsageError
from logbook.run import Run

torch = pytest.importorskip("torch")

from replay.config import tiny  # noqa: E402
from replay.experiment import counterfactual, plan_jobs, pool_map  # noqa: E402
from replay.interventions import parse_spec, parse_variant  # noqa: E402
from replay.recording import compare, record  # noqa: E402

VARIANTS = ["baseline=baseline", "half=lr_scale:0.5", "skip3=skip:+3", "qk=qk_norm"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("rec")
    record(tiny(), root, checkpoint_every=5)
    return root


@pytest.fixture(scope="module")
def result(recorded, tmp_path_factory):
    out = tmp_path_factory.mktemp("cf")
    variants = [parse_variant(v) for v in VARIANTS]
    outcomes, text = counterfactual(recorded, out, variants, 10, 20, seeds=2, workers=1)
    return out, outcomes, text


def test_jobs_order_and_seeds(result):
    _, outcomes, _ = result
    assert [(o.variant, o.seed) for o in outcomes] == [
        (v.split("=")[0], s) for v in VARIANTS for s in (0, 1)
    ]
    assert [o.steps_lost for o in outcomes] == [0, 0, 0, 0, 3, 3, 0, 0]


def test_baseline_with_the_recorded_seed_replays_the_recording(recorded, result):
    out, outcomes, _ = result
    recording = Run.read(recorded / "run.jsonl")
    base = Run.read(out / outcomes[0].run_file)
    assert base.metrics.get_column("step").to_list() == list(range(1, 21))  # prefix + replay
    assert compare(recording, base, 0, 20).first is None
    other = Run.read(out / outcomes[1].run_file)  # seed 1: other batches after step 10
    diff = compare(recording, other, 10, 20).first
    assert (diff.step, diff.metric) == (11, "loss")


def test_variant_runs_carry_their_changes(result):
    out, outcomes, _ = result
    half = Run.read(out / "runs" / "half-seed0.jsonl").metrics
    base = Run.read(out / "runs" / "baseline-seed0.jsonl").metrics
    lr, lr0 = half.get_column("lr").to_list(), base.get_column("lr").to_list()
    assert lr[:10] == lr0[:10] and lr[10:] == [x * 0.5 for x in lr0[10:]]
    skip = Run.read(out / "runs" / "skip3-seed0.jsonl")
    steps = skip.metrics.get_column("step").to_list()
    assert steps == list(range(1, 11)) + list(range(14, 21))
    qk = Run.read(out / "runs" / "qk-seed1.jsonl")  # from step 0, with its own seed
    assert qk.meta.model_dump()["replay"]["config"]["train"]["seed"] == 1
    assert qk.metrics.get_column("step").to_list() == list(range(1, 21))
    assert qk.meta.model_dump()["replay"]["plan"] == [{"kind": "qk_norm"}]


def test_table_results_and_figure_are_written(result):
    out, outcomes, text = result
    assert (out / "table.md").read_text() == text
    lines = text.splitlines()
    assert lines[0].endswith(": counterfactual from step 10 to 20, 2 seed(s) varying data order")
    assert lines[2] == (
        "| variant | runs | spikes (95% CI) | steps to spike | final loss (mean ± sd) "
        "| max loss (mean) | max attn logit | steps lost (mean) |"
    )
    # no spike in 2 runs: the rate's 95% Wilson interval still reaches 0.66
    skip = next(line for line in lines if line.startswith("| skip3 | 2 | "))
    assert skip.startswith("| skip3 | 2 | 0/2 (0.00-0.66) | - | ") and skip.endswith("| 3.0 |")
    mean = (outcomes[4].final_loss + outcomes[5].final_loss) / 2
    assert f"| {mean:.3f} ± " in skip
    effect = next(line for line in lines if line.startswith("| skip3 | +0.00 "))
    assert effect.startswith("| skip3 | +0.00 (-0.66 to +0.66) | ")
    summary = json.loads((out / "summary.json").read_text())
    assert [r["variant"] for r in summary] == ["baseline", "half", "skip3", "qk"]
    assert summary[2]["final_loss_mean"] == pytest.approx(mean)
    assert summary[2]["steps_lost_mean"] == 3.0 and summary[2]["spikes"] == 0
    data = json.loads((out / "results.json").read_text())
    assert len(data) == 8 and data[0]["variant"] == "baseline" and data[0]["spike"] is False
    assert data[0]["final_loss"] == pytest.approx(outcomes[0].final_loss)
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_seeds_that_vary_the_init_train_from_step_0_on_the_recorded_batches(recorded, tmp_path):
    variants = [parse_variant("baseline=baseline")]
    outcomes, text = counterfactual(recorded, tmp_path, variants, 10, 20, 2, 1, vary="init")
    assert text.splitlines()[0].endswith("2 seed(s) varying initialisation")
    assert [o.vary for o in outcomes] == ["init", "init"]
    recording = Run.read(recorded / "run.jsonl")
    first = Run.read(tmp_path / outcomes[0].run_file)
    assert compare(recording, first, 0, 20).first is None  # the recording's own seed
    other = Run.read(tmp_path / outcomes[1].run_file)
    assert other.meta.model_dump()["replay"]["config"]["train"]["seed"] == 1
    assert compare(recording, other, 0, 20).first.step == 1  # another init from step 1
    with pytest.raises(UsageError, match="--vary 'weights': expected one of data, init, both"):
        plan_jobs(recorded, tmp_path, variants, 10, 20, 1, vary="weights")


def test_parallel_jobs_give_the_same_results(recorded, result, tmp_path):
    out, _, _ = result
    variants = [parse_variant(v) for v in VARIANTS]
    counterfactual(recorded, tmp_path, variants, 10, 20, seeds=2, workers=2)
    assert (tmp_path / "results.json").read_text() == (out / "results.json").read_text()


def test_bad_requests_are_usage_errors(recorded, tmp_path):
    one = [parse_variant("a=baseline")]
    with pytest.raises(UsageError, match="variant names must be unique: a"):
        plan_jobs(recorded, tmp_path, one + one, 10, 20, 1)
    with pytest.raises(UsageError, match="--until 10 must be after --from 10"):
        plan_jobs(recorded, tmp_path, one, 10, 10, 1)
    with pytest.raises(UsageError, match="--seeds must be >= 1"):
        plan_jobs(recorded, tmp_path, one, 10, 20, 0)
    with pytest.raises(InputError, match="no checkpoint at step 12"):
        plan_jobs(recorded, tmp_path, one, 12, 20, 1)


def test_cli_prints_the_table(recorded, tmp_path):
    a = typer.Typer()
    cli_replay.register(a)
    args = ["replay", "counterfactual", str(recorded), "--from", "15", "--until", "20"]
    args += ["--variant", "b=baseline", "--seeds", "1", "--jobs", "1", "-o", str(tmp_path)]
    r = CliRunner().invoke(a, args)
    assert r.exit_code == 0, r.output
    assert "| b | 0 |" in r.output and r.output.rstrip().endswith("comparison.png")
    r = CliRunner().invoke(a, args[:-6] + ["--variant", "b=warp", "-o", str(tmp_path)])
    assert isinstance(r.exception, UsageError) and "unknown intervention 'warp'" in str(r.exception)


def test_pool_map_keeps_job_order_and_raises_a_worker_error():
    specs = ["baseline", "clip:1.0", "lr_scale:0.5,clip:2", "skip:+3", "qk_norm"]
    plans = pool_map(parse_spec, specs, workers=2, cost=len)
    assert [p.to_list() for p in plans] == [parse_spec(s).to_list() for s in specs]
    # The first job goes to the spawned worker, the second to this process.
    with pytest.raises(UsageError, match="unknown intervention 'warp'"):
        pool_map(parse_spec, ["warp", "baseline"], workers=2)
    with pytest.raises(UsageError, match="--jobs must be >= 1"):
        pool_map(parse_spec, specs, workers=0)
