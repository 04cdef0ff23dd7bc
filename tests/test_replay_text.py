"""The real-text data (the standard library's source as bytes), pathological batches and
the named presets."""

import re

import pytest

torch = pytest.importorskip("torch")

from logbook.errors import UsageError  # noqa: E402
from replay.config import ReplayConfig  # noqa: E402
from replay.data import DataConfig, Stream  # noqa: E402
from replay.presets import PRESETS, preset  # noqa: E402
from replay.text import RUN, corpus, stdlib_root  # noqa: E402

SMALL = 200_000


def text_stream(batch: int = 4, **data) -> Stream:
    return Stream(DataConfig(max_bytes=SMALL, **data), 256, 32, batch)


def test_the_corpus_is_the_standard_library_source_cut_and_fingerprinted():
    tokens, digest = corpus(SMALL)
    assert tokens.dtype == torch.uint8 and tokens.numel() == SMALL
    blob = bytes(tokens.tolist())
    assert b"def " in blob and b'"""' in blob  # code and docstrings
    assert re.search(rb"(.)\1{%d}" % RUN, blob, re.DOTALL) is None  # runs cut to 16
    assert corpus(SMALL)[1] == digest and len(digest) == 64
    assert (stdlib_root() / "os.py").is_file()


def test_text_batches_are_windows_of_the_corpus_and_pure_in_seed_and_step():
    s = text_stream()
    x, y = s.batch(3, 10)
    assert x.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    blob = bytes(corpus(SMALL)[0].tolist())
    row = bytes(x[0].tolist()) + bytes(y[0, -1:].tolist())
    assert row in blob
    s.batch(3, 11), s.batch(4, 10)
    assert torch.equal(text_stream().batch(3, 10)[0], x)
    assert not torch.equal(s.batch(3, 11)[0], x) and not torch.equal(s.batch(4, 10)[0], x)
    assert s.fingerprint == corpus(SMALL)[1]


@pytest.mark.parametrize("kind", ["repeat", "noise", "copy"])
def test_pathological_batches_replace_only_their_steps(kind):
    clean, bad = text_stream(), text_stream(bad_from=5, bad_steps=2, bad_kind=kind)
    for step in (4, 7):
        assert torch.equal(clean.batch(0, step)[0], bad.batch(0, step)[0])
    for step in (5, 6):
        x, y = bad.batch(0, step)
        assert not torch.equal(x, clean.batch(0, step)[0])
        assert torch.equal(x[:, 1:], y[:, :-1])
        if kind == "repeat":
            assert all(len(set(r)) == 1 for r in x.tolist())
        if kind == "copy":
            assert all(r == x[0].tolist() for r in x.tolist())
    assert bad.is_bad(5) and bad.is_bad(6) and not bad.is_bad(7)


def test_a_pool_is_one_small_dataset_for_every_seed_in_an_order_of_each_seed():
    clean, pooled = text_stream(), text_stream(pool_from=5, pool_size=3)
    assert torch.equal(clean.batch(2, 4)[0], pooled.batch(2, 4)[0])  # before the pool
    pool = {bytes(clean.batch(0, 5 + i)[0].flatten().tolist()) for i in range(3)}

    def drawn(seed: int) -> list[bytes]:
        return [bytes(pooled.batch(seed, k)[0].flatten().tolist()) for k in range(5, 17)]

    for seed in (0, 1):
        got = drawn(seed)
        assert set(got) == pool  # the same three batches, whatever the seed
        for epoch in range(4):  # each pass over the pool holds each batch once
            assert len(set(got[3 * epoch : 3 * epoch + 3])) == 3
    assert drawn(0) != drawn(1) and drawn(0) == drawn(0)  # an order per seed, pure


def test_bad_data_settings_are_refused_in_one_line():
    cfg = ReplayConfig()
    cfg.data.source = "wiki"
    with pytest.raises(UsageError, match=r"data.source must be one of \['stdlib', 'phrases'\]"):
        cfg.check()
    cfg = ReplayConfig()
    cfg.model.vocab_size = 64
    with pytest.raises(UsageError, match="'stdlib' is bytes: model.vocab_size must be >= 256"):
        cfg.check()
    cfg = ReplayConfig()
    cfg.data.bad_kind = "zeros"
    with pytest.raises(UsageError, match="data.bad_kind must be one of"):
        cfg.check()


def test_presets_name_their_settings_and_fix():
    from logbook.cli_replay import PRESET_NAMES

    names = ["healthy", "data-spike", "fp16-attn-logits", "adam-second-moment"]
    assert list(PRESETS) == names == list(PRESET_NAMES)
    ds = preset("data-spike")
    assert ds.settings == {"data": {"bad_from": 200, "bad_steps": 5, "bad_kind": "repeat"}}
    assert (ds.fix, ds.fix_from) == ("skip:200-204", 150)
    asm = preset("adam-second-moment")
    assert asm.settings["data"] == {"pool_from": 100, "pool_size": 2}
    assert (asm.fix, asm.fix_from) == ("beta2:0.999,lr_scale:0.5", 250)
    known = "healthy, data-spike, fp16-attn-logits, adam-second-moment"
    with pytest.raises(UsageError, match=f"--preset 'spiky': unknown; one of {known}"):
        preset("spiky")


def _preset_config(name: str) -> ReplayConfig:
    return ReplayConfig.from_dict(preset(name).apply(ReplayConfig().to_dict()))


def _baseline_and_fix(name: str, until: int):
    """A preset's recording up to ``until``, and its reported fix from ``fix_from`` on."""
    from replay.checkpoint import snapshot, trainer_from
    from replay.engine import Trainer
    from replay.interventions import parse_spec

    p = preset(name)
    trainer = Trainer(_preset_config(name))
    trainer.run(p.fix_from)
    state = snapshot(trainer)
    trainer.run(until)
    fixed = trainer_from(state, parse_spec(p.fix).resolved(p.fix_from + 1))
    fixed.run(until)
    return trainer.to_run(), fixed.to_run()


def test_the_data_spike_preset_spikes_from_a_trained_state_and_skipping_saves_it():
    from logbook.detectors import detect

    run, fixed = _baseline_and_fix("data-spike", 215)
    loss = run.metrics.get_column("loss")
    assert loss[199] > 2.5 * loss[190:199].mean()  # the first bad batch, step 200
    assert loss[180:199].mean() < 0.7 * loss.head(5).mean()  # from a trained state
    spikes = [f for f in detect(run) if f.kind == "loss_spike"]
    assert [(f.start_step, f.severity) for f in spikes] == [(200, "critical")]
    assert [f.kind for f in detect(fixed) if f.kind == "loss_spike"] == []
    assert fixed.metrics.filter(fixed.metrics["step"] >= 200).get_column("loss").max() < 3.0


def test_the_adam_preset_spikes_from_a_memorised_state_and_a_higher_beta2_saves_it():
    from logbook.detectors import detect

    run, fixed = _baseline_and_fix("adam-second-moment", 345)
    loss = run.metrics.get_column("loss")
    assert loss[290:320].mean() < 0.05 * loss.head(5).mean()  # learnt by heart
    peak = loss[300:].max()
    spikes = [f for f in detect(run) if f.kind == "loss_spike" and f.severity == "critical"]
    assert [(f.start_step, f.severity) for f in spikes] == [(325, "critical")]
    assert "loss rose 9.86x" in spikes[0].message and "at step 331" in spikes[0].message
    assert [f for f in detect(fixed) if f.kind == "loss_spike"] == []
    after = fixed.metrics.filter(fixed.metrics["step"] > 300).get_column("loss")
    assert after.max() < 0.3 * peak


def test_a_text_recording_keeps_its_corpus_and_verify_names_another(tmp_path):
    import json

    from replay.config import tiny
    from replay.recording import record, verify

    cfg = tiny()
    cfg.model.vocab_size = 256
    cfg.data.source, cfg.data.max_bytes = "stdlib", SMALL
    record(cfg, tmp_path, checkpoint_every=5)
    path = tmp_path / "recording.json"
    settings = json.loads(path.read_text())
    digest = corpus(SMALL)[1]
    assert settings["environment"]["corpus"] == digest
    assert verify(tmp_path, 10).environment == [] and verify(tmp_path, 10).first is None
    settings["environment"]["corpus"] = "0" * 64
    path.write_text(json.dumps(settings))
    assert verify(tmp_path, 10).environment == [f"corpus: {'0' * 64} -> {digest}"]


def test_fp16_range_turns_an_overflowing_attention_score_into_a_nan_loss():
    from replay.model import GPT, ModelConfig

    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=64, block_size=8, n_layer=1, n_head=2, n_embd=16))
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.mul_(3000.0)  # scores of ~1e5 and more
    x = torch.randint(0, 64, (2, 8))
    _, ce, stats = model(x, x, instrument=True)
    assert torch.isfinite(ce) and float(stats.attn_logit_max) > 65504
    _, ce16, _ = model(x, x, instrument=True, fp16=True)
    assert torch.isnan(ce16)
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.div_(3000.0)
    a, b = model(x, x)[1], model(x, x, fp16=True)[1]
    assert torch.equal(a, b)  # in range: bit for bit the same


def test_bf16_from_a_step_drops_the_loss_scale_and_is_a_config_change():
    from replay.config import tiny
    from replay.engine import Trainer
    from replay.interventions import parse_item, parse_spec

    assert parse_item("bf16@3").kind == "bf16"
    with pytest.raises(UsageError, match="bf16 takes no value"):
        parse_item("bf16:1")
    cfg = tiny()
    cfg.train.fp16 = True
    trainer = Trainer(cfg, parse_spec("bf16@3"))
    trainer.run(5)
    run = trainer.to_run()
    assert run.metrics.get_column("loss_scale").to_list()[:2] == [65536.0, 65536.0]
    assert run.metrics.get_column("loss_scale").to_list()[2:] == [None, None, None]
    (ev,) = run.events_of("config_change")
    assert (ev.step, ev.key, ev.old, ev.new) == (3, "precision", "fp16", "bf16")
