"""Replay engine parts: data stream, model instrumentation, LR schedule, loss scaler."""

import math

import pytest

torch = pytest.importorskip("torch")

from replay.data import DataConfig, TokenStream, mix  # noqa: E402
from replay.model import GPT, ModelConfig  # noqa: E402
from replay.optim import LossScaler, Schedule, clip_, grad_norm  # noqa: E402

TINY = ModelConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=16)


def stream(batch: int = 4) -> TokenStream:
    return TokenStream(DataConfig(n_phrases=64), vocab_size=64, block_size=16, batch_size=batch)


# ---- data -------------------------------------------------------------------------


def test_batch_is_a_pure_function_of_seed_and_step():
    a, b = stream(), stream()
    x5, y5 = a.batch(7, 5)
    b.batch(7, 1), b.batch(3, 5), b.batch(7, 6)  # other calls in between change nothing
    x5b, y5b = b.batch(7, 5)
    assert torch.equal(x5, x5b) and torch.equal(y5, y5b)
    assert not torch.equal(x5, a.batch(7, 6)[0])  # another step: another batch
    assert not torch.equal(x5, a.batch(8, 5)[0])  # another seed: another batch


def test_batch_shapes_targets_and_range():
    x, y = stream(batch=3).batch(0, 1)
    assert x.shape == (3, 16) and y.shape == (3, 16) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    assert int(x.min()) >= 0 and int(x.max()) < 64


def test_phrases_make_the_stream_learnable():
    # Without noise every token inside a phrase is followed by its phrase's next token.
    s = TokenStream(DataConfig(n_phrases=8, noise=0.0), 64, 16, 2)
    x, _ = s.batch(0, 3)
    phrases = {tuple(s.table[i, : s.lengths[i]].tolist()) for i in range(8)}
    row = x[0].tolist()
    assert any(tuple(row[i : i + len(p)]) == p for p in phrases for i in range(len(row)))


def test_mix_is_stable_and_distinct():
    assert mix(0, 1) == mix(0, 1)
    assert len({mix(0, k) for k in range(1000)}) == 1000
    assert 0 <= mix(2**70, -5) < 2**63


# ---- model ------------------------------------------------------------------------


def reference_logit_max(model: GPT, idx) -> float:
    """The max attention logit over layers, computed directly from the weights."""
    x = model.wte(idx) + model.wpe.weight[: idx.shape[1]]
    best = -math.inf
    for block in model.blocks:
        h = block.ln1(x)
        q, k, _ = block.attn.qkv(h).split(model.cfg.n_embd, dim=2)
        B, T, C = q.shape
        q = q.view(B, T, 2, C // 2).transpose(1, 2)
        k = k.view(B, T, 2, C // 2).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(C // 2)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        best = max(best, float(att[..., mask].max()))
        x, _ = block(x, False)
    return best


def test_instrumentation_matches_a_direct_computation():
    torch.manual_seed(0)
    model = GPT(TINY)
    x, y = stream().batch(0, 1)
    with torch.no_grad():
        objective, ce, stats = model(x, y, instrument=True)
        logits = model.head(model.ln_f(_residual(model, x)))
        reference = reference_logit_max(model, x)
    assert float(stats.attn_logit_max) == pytest.approx(reference, rel=1e-6)
    assert stats.act_norms.shape == (2,)
    with torch.no_grad():
        last = float(_residual(model, x).norm(dim=-1).mean())
    assert float(stats.act_norms[-1]) == pytest.approx(last, rel=1e-6)
    assert float(stats.logz) == pytest.approx(float(torch.logsumexp(logits, -1).mean()), rel=1e-6)
    expected_ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
    assert float(ce) == pytest.approx(float(expected_ce), rel=1e-6)
    assert torch.equal(objective, ce)  # no z-loss: the objective is the cross-entropy


def _residual(model: GPT, idx):
    x = model.wte(idx) + model.wpe.weight[: idx.shape[1]]
    for block in model.blocks:
        x, _ = block(x, False)
    return x


def test_z_loss_adds_mean_squared_log_z():
    torch.manual_seed(0)
    model = GPT(TINY)
    x, y = stream().batch(0, 1)
    with torch.no_grad():
        objective, ce, stats = model(x, y, z_loss=0.5, instrument=True)
        lse = torch.logsumexp(model.head(model.ln_f(_residual(model, x))), -1)
    assert float(objective - ce) == pytest.approx(0.5 * float(lse.pow(2).mean()), rel=1e-5)


def test_uninstrumented_forward_returns_no_stats():
    model = GPT(TINY)
    x, y = stream().batch(0, 1)
    assert model(x, y)[2] is None


@pytest.mark.parametrize("qk_norm", [False, True])
def test_qk_norm_bounds_attention_logits_when_weights_grow(qk_norm):
    torch.manual_seed(0)
    model = GPT(ModelConfig(**{**TINY.__dict__, "n_layer": 1, "qk_norm": qk_norm}))
    x, y = stream().batch(0, 1)
    with torch.no_grad():
        before = float(model(x, y, instrument=True)[2].attn_logit_max)
        model.blocks[0].attn.qkv.weight[:32].mul_(30.0)  # q and k grow 30x: logits 900x
        after = float(model(x, y, instrument=True)[2].attn_logit_max)
    if qk_norm:
        # Normalized q, k with unit gains: |q.k| / sqrt(hs) <= sqrt(hs) = sqrt(8).
        assert after <= math.sqrt(8) + 1e-4
    else:
        assert after == pytest.approx(before * 900, rel=1e-3)


# ---- schedule, clipping, loss scaler ---------------------------------------------------


def test_warmup_then_cosine():
    s = Schedule(peak=1.0, warmup=10, total=110, min_ratio=0.1)
    assert s(1) == pytest.approx(0.1) and s(10) == pytest.approx(1.0)
    assert s(60) == pytest.approx(0.55)  # half-way down the cosine: (1 + 0.1) / 2
    assert s(110) == pytest.approx(0.1) and s(500) == pytest.approx(0.1)


def test_recorded_series_is_clamped_at_its_ends():
    s = Schedule(peak=1.0, series=[0.5, 0.25, 0.125], series_start=4)
    assert [s(k) for k in (1, 4, 5, 6, 9)] == [0.5, 0.5, 0.25, 0.125, 0.125]
    assert Schedule.from_dict(s.state_dict()) == s


def test_clip_scales_to_the_threshold_and_leaves_small_gradients():
    g = [torch.tensor([3.0, 4.0]), torch.tensor([0.0])]
    norm = grad_norm(g)
    assert float(norm) == 5.0
    clip_(g, norm, 1.0)
    assert float(grad_norm(g)) == pytest.approx(1.0, rel=1e-5)
    small = [torch.tensor([0.3, 0.4])]
    clip_(small, grad_norm(small), 1.0)
    assert small[0].tolist() == pytest.approx([0.3, 0.4], rel=1e-6)


def test_loss_scaler_skips_and_halves_on_fp16_overflow():
    sc = LossScaler(scale=1024.0, window=3)
    grads = [torch.tensor([70000.0, 1.0])]  # beyond fp16's 65504
    assert sc.unscale(grads) is True
    assert sc.scale == 512.0 and sc.good_steps == 0
    assert sc.unscale([torch.tensor([float("nan")])]) is True and sc.scale == 256.0


def test_loss_scaler_unscales_grows_after_window_and_keeps_min():
    sc = LossScaler(scale=4.0, window=2, min_scale=2.0)
    g = [torch.tensor([8.0, 2.0])]
    assert sc.unscale(g) is False
    assert g[0].tolist() == [2.0, 0.5] and sc.scale == 4.0 and sc.good_steps == 1
    assert sc.unscale([torch.tensor([1.0])]) is False and sc.scale == 8.0
    tiny = [torch.tensor([1e-9])]  # below fp16's smallest subnormal: underflows to 0
    sc.unscale(tiny)
    assert tiny[0].tolist() == [0.0]
    low = LossScaler(scale=2.0, min_scale=2.0)
    low.unscale([torch.tensor([float("inf")])])
    assert low.scale == 2.0
    restored = LossScaler()
    restored.load_state_dict(sc.state_dict())
    assert restored.state_dict() == sc.state_dict()
