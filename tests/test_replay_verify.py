"""Bitwise replay: checkpoints, resume, and `logbook replay verify`."""

import json
import re
import shutil

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from logbook import cli_replay
from logbook.errors import InputError, UsageError
from logbook.run import Run

torch = pytest.importorskip("torch")

from replay.checkpoint import CheckpointDir, snapshot, trainer_from  # noqa: E402
from replay.config import tiny  # noqa: E402
from replay.engine import Trainer  # noqa: E402
from replay.recording import compare, record  # noqa: E402

METRICS = ["loss", "lr", "grad_norm", "act_norm", "param_norm", "attn_logit_max", "logz"]


def app() -> typer.Typer:
    a = typer.Typer()
    cli_replay.register(a)
    return a


def invoke(*args: str):
    return CliRunner().invoke(app(), ["replay", *args])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("rec")
    record(tiny(), root, checkpoint_every=5)
    return root


def test_recording_is_a_logbook_run_with_every_metric(recorded):
    run = Run.read(recorded / "run.jsonl")
    m = run.metrics
    assert m.get_column("step").to_list() == list(range(1, 21))
    assert m.get_column("segment").unique().to_list() == [0]
    for col in METRICS + ["act_norm_layer0", "step_time_s", "samples", "tokens"]:
        assert m.get_column(col).null_count() == 0, col
    assert m.get_column("loss_scale").null_count() == 20  # not fp16: absent, not 0
    assert m.get_column("samples").to_list()[:2] == [4, 8]  # batch size 4
    assert m.get_column("act_norm").to_list() == m.get_column("act_norm_layer0").to_list()
    saves = [e.step for e in run.events_of("checkpoint_save")]
    assert saves == [0, 5, 10, 15, 20]
    assert run.meta.model_dump()["replay"]["config"]["train"]["steps"] == 20


def test_checkpoint_index_holds_content_hashes_and_no_temp_files(recorded):
    index = json.loads((recorded / "checkpoints" / "index.json").read_text())["checkpoints"]
    assert [e["step"] for e in index] == [0, 5, 10, 15, 20]
    assert all(len(e["sha256"]) == 64 for e in index)
    names = sorted(p.name for p in (recorded / "checkpoints").iterdir())
    assert names == ["index.json"] + [f"step_{s:08d}.pt" for s in (0, 5, 10, 15, 20)]


@pytest.mark.parametrize("k", [0, 5, 10, 15])
def test_resume_from_any_checkpoint_is_bitwise_identical(recorded, k):
    state = CheckpointDir(recorded).load(k)
    trainer = trainer_from(state)
    trainer.run(20)
    result = compare(Run.read(recorded / "run.jsonl"), trainer.to_run(), k, 20)
    assert result.first is None
    assert result.rows == 20 - k and set(METRICS) <= set(result.metrics)


def test_two_fresh_trainers_give_the_same_bits():
    a, b = Trainer(tiny()), Trainer(tiny())
    a.run(10)
    b.run(10)
    cols = [c for c in a.to_run().metrics.columns if c != "step_time_s"]
    assert a.to_run().metrics.select(cols).equals(b.to_run().metrics.select(cols))


def test_restoring_twice_from_one_in_memory_checkpoint():
    trainer = Trainer(tiny())
    trainer.run(8)
    snap = snapshot(trainer)
    moments = [s["exp_avg"].clone() for s in snap["optimizer"]["state"].values()]
    runs = []
    for _ in range(2):
        t = trainer_from(snap)
        t.run(16)
        runs.append(t.to_run().metrics.select(METRICS))
    assert runs[0].equals(runs[1])
    # The snapshot's optimizer moments were not updated in place by either replay.
    after = [s["exp_avg"] for s in snap["optimizer"]["state"].values()]
    assert all(torch.equal(a, b) for a, b in zip(moments, after, strict=True))
    trainer.run(16)  # and both equal the uninterrupted run
    assert trainer.to_run().metrics.filter(pl.col("step") > 8).select(METRICS).equals(runs[0])


def test_verify_cli_identical(recorded):
    r = invoke("verify", str(recorded), "--from", "10")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("identical: steps 11..20 (10 steps, ")
    assert "equal the recording bit for bit" in r.output


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("reset_opt", "differs: first difference at step 11: param_norm recorded "),
        ("data_seed:99", "differs: first difference at step 11: loss recorded "),
        ("skip:+1", "differs: first difference at step 11: record recorded present, "
                    "replayed absent"),
    ],
)  # fmt: skip
def test_verify_reports_the_first_step_that_differs(recorded, change, expected):
    r = invoke("verify", str(recorded), "--from", "10", "--change", change)
    assert r.exit_code == 1
    assert r.output.startswith(expected), r.output


def test_verify_until_limits_the_comparison(recorded):
    r = invoke("verify", str(recorded), "--from", "5", "--until", "8")
    assert r.exit_code == 0 and r.output.startswith("identical: steps 6..8 (3 steps")


def test_fp16_emulation_skips_and_halves_then_resumes_bitwise(tmp_path):
    cfg = tiny()
    cfg.train.fp16 = True
    cfg.train.init_scale = 2.0**24  # scaled gradients overflow fp16 until the scale drops
    cfg.train.scale_window = 4
    run = record(cfg, tmp_path, checkpoint_every=10)
    m = run.metrics
    skipped = m.get_column("skipped").to_list()
    scale = m.get_column("loss_scale").to_list()
    n = skipped.index(0)
    assert n >= 1 and skipped[:n] == [1] * n
    assert scale[:n] == [2.0 ** (24 - i) for i in range(1, n + 1)]  # halved per overflow
    assert m.get_column("grad_norm").head(n).null_count() == n  # no norm for skipped steps
    assert len(run.events_of("overflow_skip")) == sum(skipped)
    grown = [i for i in range(1, 20) if scale[i] == 2 * scale[i - 1]]
    assert grown and all(skipped[i - 3 : i + 1] == [0] * 4 for i in grown)  # 4 good steps
    state = CheckpointDir(tmp_path).load(10)
    t = trainer_from(state)
    t.run(20)
    assert compare(run, t.to_run(), 10, 20).first is None


def test_damaged_or_missing_checkpoints_are_input_errors(recorded, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(recorded, copy)
    with pytest.raises(InputError, match=r"no checkpoint at step 7 \(have: 0, 5, 10, 15, 20\)"):
        CheckpointDir(copy).load(7)
    path = copy / "checkpoints" / "step_00000005.pt"
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(InputError, match="content hash does not match the index"):
        CheckpointDir(copy).load(5)
    r = invoke("verify", str(tmp_path), "--from", "0")
    assert isinstance(r.exception, InputError) and "no recorded run here" in str(r.exception)


def test_record_refuses_a_non_empty_directory(recorded):
    r = invoke("record", "-o", str(recorded), "--steps", "3")
    assert isinstance(r.exception, UsageError)
    assert "directory is not empty (--force replaces a recording)" in str(r.exception)


def test_record_cli_with_config_file_and_force(tmp_path):
    conf = tmp_path / "tiny.json"
    cfg = tiny().to_dict()
    conf.write_text(json.dumps({"model": cfg["model"], "data": cfg["data"]}))
    out = tmp_path / "run"
    args = ["record", "-o", str(out), "--config", str(conf), "--steps", "6", "--lr", "0.01"]
    r = invoke(*args, "--checkpoint-every", "3", "--seed", "2")
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"recorded 6 steps in {out}: final loss ")
    assert r.output.rstrip().endswith("3 checkpoints")
    r = invoke(*args, "--force", "--checkpoint-every", "0")
    assert r.exit_code == 0 and r.output.rstrip().endswith("2 checkpoints")
    assert CheckpointDir(out).steps() == [0, 6]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"train": {"warp": 1}}))
    r = invoke("record", "-o", str(tmp_path / "x"), "--config", str(bad))
    assert isinstance(r.exception, UsageError) and "unknown TrainConfig keys ['warp']" in str(
        r.exception
    )


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"step": 5, "file": "step_00000005.pt"}, "entry of step 5 has no sha256 hash"),
        ({"step": 5, "file": "../../outside.pt", "sha256": "0" * 64}, "is not a checkpoint file"),
        ({"step": 5, "file": "/etc/passwd", "sha256": "0" * 64}, "is not a checkpoint file"),
        ({"step": "five", "file": "step_5.pt", "sha256": "0" * 64}, "damaged checkpoint index"),
        ({"step": 2**70, "file": "step_5.pt", "sha256": "0" * 64}, "is not a step number"),
    ],
)
def test_a_bad_index_entry_is_named_and_never_followed_outside(recorded, tmp_path, entry, why):
    copy = tmp_path / "copy"
    shutil.copytree(recorded, copy)
    (copy / "checkpoints" / "index.json").write_text(json.dumps({"checkpoints": [entry]}))
    with pytest.raises(InputError, match=re.escape(why)):
        CheckpointDir(copy).load(5)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model": {"n_head": 0}}, "replay config: model.n_head = 0: must be in [1, 128]"),
        ({"model": {"n_embd": 65536}}, "replay config: model.n_embd = 65536: must be in [1, 8192]"),
        ({"model": {"n_embd": "big"}}, "replay config: model.n_embd = 'big': input should be"),
        ({"train": {"lr": float("nan")}}, "replay config: train.lr = nan: not a number"),
        ({"train": {"fp16": "yes"}}, "replay config: train.fp16 = 'yes': input should be"),
        ({"model": {"n_layer": 96, "n_embd": 8192}}, "replay config: a model of 77,312,"),
        ({"model": {"vocab": 3}}, "unknown ModelConfig keys ['vocab']"),
    ],
)
def test_every_config_value_is_checked_against_its_bounds(config, message):
    from replay.config import ReplayConfig

    with pytest.raises(UsageError, match=re.escape(message)):
        ReplayConfig.from_dict(config).check()
    assert ReplayConfig.from_dict({"model": {"n_embd": "64"}}).check().model.n_embd == 64


def test_an_interrupted_recording_resumes_to_the_same_run_bit_for_bit(tmp_path, monkeypatch):
    from replay import recording
    from replay.engine import Trainer

    whole = tmp_path / "whole"
    record(tiny(), whole, checkpoint_every=5)
    cut = tmp_path / "cut"
    real_step = Trainer.train_step

    def dies_at_13(self):
        if self.step == 12:
            raise KeyboardInterrupt  # (a kill: nothing after this runs)
        real_step(self)

    monkeypatch.setattr(Trainer, "train_step", dies_at_13)
    with pytest.raises(KeyboardInterrupt):
        record(tiny(), cut, checkpoint_every=5)
    monkeypatch.setattr(Trainer, "train_step", real_step)
    partial = Run.read(cut / "run.jsonl")  # written at the last checkpoint, step 10
    assert partial.metrics.get_column("step").to_list() == list(range(1, 11))
    run, start = recording.resume(cut)
    assert start == 10
    a, b = (Run.read(p / "run.jsonl").metrics.drop("step_time_s", "time") for p in (whole, cut))
    assert a.equals(b)
    assert CheckpointDir(cut).steps() == CheckpointDir(whole).steps() == [0, 5, 10, 15, 20]
    # the last checkpoint holds the same state (equal tensors; the serialized bytes may
    # lay storages out differently)
    last = [CheckpointDir(p).load(20) for p in (whole, cut)]
    assert _same_state(last[0], last[1])
    assert recording.resume(cut)[0].metrics.height == 20  # finished: nothing more to do


def test_resume_refuses_a_folder_that_is_no_recording(tmp_path):
    from replay import recording

    with pytest.raises(InputError, match="not a recording that can be resumed"):
        recording.resume(tmp_path)


def _same_state(x, y) -> bool:
    import torch

    if isinstance(x, dict):
        return set(x) == set(y) and all(_same_state(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple):
        return len(x) == len(y) and all(_same_state(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, torch.Tensor):
        return isinstance(y, torch.Tensor) and x.dtype == y.dtype and torch.equal(x, y)
    return x == y


def test_recording_keeps_the_settings_that_decide_its_bits(recorded, tmp_path):
    env = json.loads((recorded / "recording.json").read_text())["environment"]
    assert env == {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": 1,  # the config's, set before the settings are written
        "device": "cpu",
        "machine": env["machine"],
    }
    assert env["machine"] and isinstance(env["machine"], str)
    # the same recording replayed where the CPU dispatches to other kernels: still
    # compared, and told which setting differs
    copy = tmp_path / "rec"
    shutil.copytree(recorded, copy)
    settings = json.loads((copy / "recording.json").read_text())
    settings["environment"]["cpu_capability"] = "AVX512_TEST"
    (copy / "recording.json").write_text(json.dumps(settings))
    res = invoke("verify", str(copy), "--from", "10")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    here = torch.backends.cpu.get_cpu_capability()
    assert lines[0] == (
        f"note: replayed with other settings than the recording (cpu_capability: AVX512_TEST "
        f"-> {here}): other kernels may round differently, so bits may differ"
    )
    assert lines[1].startswith("identical: steps 11..20")
    # a recording made before the settings were kept says nothing
    del settings["environment"]
    (copy / "recording.json").write_text(json.dumps(settings))
    res = invoke("verify", str(copy), "--from", "10")
    assert res.output.startswith("identical: steps 11..20"), res.output
