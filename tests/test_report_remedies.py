from pathlib import Path

import numpy as np
import polars as pl
import pytest

from logbook.detectors import detect
from logbook.report.incidents import incidents
from logbook.report.remedies import remedies
from logbook.run import Run, RunMeta
from logbook.schema import CheckpointSave, Finding, Restart

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "incident_run.jsonl"


@pytest.fixture(scope="module")
def fixture_remedy():
    run = Run.read(FIXTURE)
    found = remedies(run, detect(run))
    assert len(found) == 1
    return found[0]


def test_fixture_rewinds_to_the_checkpoint_before_the_precursors(fixture_remedy):
    r = fixture_remedy
    assert r.finding.kind == "loss_spike" and r.finding.segment == 1
    assert [o.kind for o in r.others] == ["divergence"]
    kinds = {p.kind for p in r.precursors}
    assert {"activation_norm_drift", "loss_scale_collapse", "grad_norm_spike"} <= kinds
    assert 1000 < r.earliest <= 1060  # the activation norm starts rising at 1040
    assert (r.checkpoint_step, r.checkpoint_path, r.rewind_step) == (
        1000,
        "/checkpoints/incident",
        1000,
    )
    assert r.rejected == []
    assert (r.skip_start, r.skip_end) == (1001, 1200)  # 200 batches: PaLM's minimum
    # the rewound line ends at 1120: samples after it are extrapolated at 256 per step
    assert r.samples == (256_000, 307_200) and r.samples_estimated
    assert (r.peak_lr, r.new_lr) == (3e-4, 1.5e-4)


def test_fixture_flags_and_replay_command(fixture_remedy):
    r = fixture_remedy
    assert list(r.commands) == ["Megatron-DeepSpeed", "Megatron-LM"]
    assert r.commands["Megatron-DeepSpeed"][-1] == (
        "--load /checkpoints/incident --skip-train-iteration-range 1001-1200 "
        "--override-lr-scheduler --lr 0.00015"
    )
    assert r.commands["Megatron-LM"][-1] == (
        "--load /checkpoints/incident --ckpt-step 1000 --iterations-to-skip $(seq 1001 1200) "
        "--override-opt_param-scheduler --lr 0.00015"
    )
    assert r.replay == (
        "logbook replay segment incident_run.jsonl --start 1000 --end 1300 --out remedy_1098 "
        "--variant skip=skip:1001-1200 "
        "--variant lr_cut=lr_scale:0.5 --variant skip_lr_cut=skip:1001-1200,lr_scale:0.5"
    )


def _run(fmt: str = "megatron", scale_at: dict | None = None, segments=((1, 3000),)) -> Run:
    frames = []
    for seg, (a, b) in enumerate(segments):
        step = np.arange(a, b + 1)
        scale = np.full(step.size, 1024.0)
        for s, v in (scale_at or {}).items():
            scale[step >= s] = v
        frames.append(
            pl.DataFrame(
                {
                    "step": step,
                    "segment": np.full(step.size, seg),
                    "loss": np.full(step.size, 2.0),
                    "lr": np.where(step < 100, step * 1e-6, 1e-4),
                    "loss_scale": scale,
                    "samples": step * 8,
                    "batch_size": np.full(step.size, 8),
                }
            )
        )
    return Run(metrics=pl.concat(frames), meta=RunMeta(format=fmt))


def _spike(step: int, end: int, segment: int = 0, fid: str = "loss_spike@x") -> Finding:
    return Finding(
        kind="loss_spike", detector="loss_spike", severity="critical", step=step,
        start_step=step, end_step=end, segment=segment, id=fid,
    )  # fmt: skip


def _with(run: Run, *events) -> Run:
    return Run(metrics=run.metrics, events=list(events), meta=run.meta)


def test_checkpoint_with_loss_scale_below_one_is_passed_over():
    run = _with(
        _run(scale_at={1700: 0.5}),
        *[CheckpointSave(step=s, path="/ck") for s in (1000, 1500, 1800)],
    )
    (r,) = remedies(run, [_spike(2000, 2010)])
    assert r.checkpoint_step == 1500
    assert r.rejected == [(1800, "loss scale 0.5 < 1")]


def test_checkpoint_inside_a_rising_activation_norm_is_passed_over():
    drift = Finding(
        kind="activation_norm_drift", detector="activation_norm_drift", severity="info",
        step=1950, start_step=1700, end_step=1990, id="activation_norm_drift@1700",
    )  # fmt: skip
    spike = _spike(2000, 2010)
    run = _with(_run(), *[CheckpointSave(step=s) for s in (1000, 1500, 1800)])
    (r,) = remedies(run, [drift, spike])
    # the drift did not precede the spike (no link): the rewind point is still the last
    # save before the onset, but the one inside the rise is not taken
    assert r.checkpoint_step == 1500
    assert r.rejected == [(1800, "activation norm rising (activation_norm_drift@1700)")]


def test_precursor_moves_the_rewind_before_it():
    pre = Finding(
        kind="grad_norm_spike", detector="grad_norm_spike", severity="warning", step=1600,
        start_step=1600, end_step=1610, id="grad_norm_spike@1600", precedes="loss_spike@x",
        lead_steps=400,
    )  # fmt: skip
    run = _with(_run(), *[CheckpointSave(step=s) for s in (1000, 1500, 1800)])
    (r,) = remedies(run, [pre, _spike(2000, 2010)])
    assert r.earliest == 1600 and r.checkpoint_step == 1500
    # the checkpoint is 500 steps before the onset: skip from 100 steps before it
    assert (r.skip_start, r.skip_end) == (1900, 2099)
    assert r.samples == (1899 * 8, 2099 * 8) and not r.samples_estimated


def test_saves_of_an_abandoned_line_are_not_rewind_points():
    run = _run(segments=((1, 300), (101, 400)))
    saves = [CheckpointSave(step=s, segment=0) for s in (100, 200, 300)]
    saves += [CheckpointSave(step=s, segment=1) for s in (150, 250)]
    run = _with(run, Restart(step=101, segment=1, resume_step=100), *saves)
    (r,) = remedies(run, [_spike(380, 390, segment=1)])
    assert r.checkpoint_step == 250
    (r,) = remedies(run, [_spike(230, 235, segment=1)])
    assert r.checkpoint_step == 150  # not segment 0's save at 200, which the rewind discarded


def test_no_checkpoint_in_the_log():
    (r,) = remedies(_with(_run()), [_spike(2000, 2700)])
    assert r.checkpoint_step is None and r.rewind_step == 1900
    assert (r.skip_start, r.skip_end) == (1901, 2400)  # capped at 500 batches
    assert r.commands["Megatron-LM"][-1].startswith("--load CHECKPOINT_DIR --ckpt-step ITER ")
    assert r.commands["Megatron-DeepSpeed"][0] == (
        "# rewind to the last checkpoint saved at or before step 1900: write ITER into "
        "CHECKPOINT_DIR/latest_checkpointed_iteration.txt and global_stepITER into "
        "CHECKPOINT_DIR/latest"
    )


@pytest.mark.parametrize(
    ("fmt", "name", "line"),
    [
        (
            "metaseq",
            "metaseq",
            "--restore-file /ck/checkpoint_1500.pt --skip-batches 1501-1700 "
            "--reset-lr-scheduler --lr 5e-05",
        ),
        (
            "fairseq-simple",
            "fairseq",
            "--restore-file /ck/checkpoint_1500.pt --reset-lr-scheduler --lr 5e-05",
        ),
        (
            "jsonl",
            "any trainer",
            "# rewind to the checkpoint of step 1500, skip the batches of steps 1501..1700 "
            "(samples 12000..13599), peak learning rate 5e-05",
        ),
    ],
)
def test_flags_per_framework(fmt, name, line):
    run = _with(_run(fmt=fmt), CheckpointSave(step=1500, path="/ck"))
    (r,) = remedies(run, [_spike(1600, 1610)])
    assert list(r.commands) == [name]
    assert r.commands[name][-1] == line


def test_incidents_merge_overlapping_critical_findings_per_line():
    a = _spike(100, 120, fid="loss_spike@100")
    b = Finding(
        kind="divergence", detector="divergence", severity="critical", step=118,
        start_step=115, end_step=140, id="divergence@115",
    )  # fmt: skip
    c = _spike(300, 305, fid="loss_spike@300")
    d = Finding(
        kind="grad_norm_spike", detector="grad_norm_spike", severity="critical", step=290,
        start_step=290, end_step=292, id="grad_norm_spike@290", precedes="loss_spike@300",
        lead_steps=10,
    )  # fmt: skip
    gone = _spike(110, 130, fid="loss_spike@110/seg0")
    gone.evidence["superseded"] = True
    found = incidents([a, b, c, d, gone])
    assert [[f.id for f in i.findings] for i in found] == [
        ["loss_spike@100", "divergence@115"],
        ["loss_spike@110/seg0"],
        ["loss_spike@300"],
    ]
    assert [(i.start, i.end) for i in found] == [(100, 140), (110, 130), (290, 305)]
    assert [p.id for p in found[2].precursors] == ["grad_norm_spike@290"]
    assert found[2].label == "loss_spike at step 300"
