"""The trainer callbacks stop a tiny real run at a planted instability.

Each run trains a tiny model at a sane learning rate, then from step ``SPIKE`` at one
far too high (a ``LambdaLR`` the trainer steps): the loss jumps and stays up. The
callback must report it and stop training well before ``max_steps``; a healthy run of
the same model must train to its end with nothing reported.
"""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch", reason="torch not installed")

SPIKE = 40
MAX_STEPS = 200
BAD_LR = 300.0


def _factor(bad: bool):
    return lambda step: BAD_LR if bad and step >= SPIKE else 1.0


def _hf_trainer(tmp_path, callback, bad: bool):
    pytest.importorskip("transformers", reason="transformers not installed")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    text = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 200)
    data = [{"input_ids": text[i * 7 : i * 7 + 32], "labels": text[i * 7 : i * 7 + 32]}
            for i in range(64)]  # fmt: skip
    config = GPT2Config(
        vocab_size=16, n_positions=32, n_embd=32, n_layer=1, n_head=2, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _factor(bad))
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=MAX_STEPS, per_device_train_batch_size=4,
        logging_steps=2, report_to=[], use_cpu=True, seed=0, disable_tqdm=True,
        max_grad_norm=1e9, save_strategy="no",
    )  # fmt: skip
    return Trainer(
        model=model, args=args, train_dataset=data, optimizers=(opt, sched), callbacks=[callback]
    )


def test_hf_callback_stops_the_trainer_at_the_instability(tmp_path, caplog):
    from logbook.callbacks import LogbookCallback

    cb = LogbookCallback(stop_on="critical")
    trainer = _hf_trainer(tmp_path, cb, bad=True)
    with caplog.at_level(logging.WARNING, logger="logbook.live"):
        trainer.train()
    stopped = trainer.state.global_step
    assert SPIKE < stopped <= SPIKE + 2 * 2 * 20 + 4  # 20 logged records at most, every 2
    assert cb.stopped_by is not None and cb.stopped_by.severity == "critical"
    assert cb.stopped_by.kind in ("grad_norm_spike", "loss_spike", "divergence")
    assert SPIKE <= (cb.stopped_by.start_step or cb.stopped_by.step) <= SPIKE + 4
    kinds = {f.kind for f in cb.findings}
    assert "loss_spike" in kinds
    assert any("stopping training" in r.getMessage() for r in caplog.records)


def test_hf_callback_lets_a_healthy_run_finish(tmp_path):
    from logbook.callbacks import LogbookCallback

    seen = []
    cb = LogbookCallback(stop_on="critical", on_finding=seen.append)
    trainer = _hf_trainer(tmp_path, cb, bad=False)
    trainer.train()
    assert trainer.state.global_step == MAX_STEPS
    assert cb.stopped_by is None
    assert [f for f in seen if f.severity == "critical"] == []


def _lightning_fit(callback, bad: bool, tmp_path):
    L = pytest.importorskip("lightning", reason="lightning not installed")

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
            )

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.05)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, _factor(bad))
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(512, 8)
    y = x[:, :1] * 0.5 - x[:, 1:2] * 0.25 + 0.1 * torch.randn(512, 1)  # a noise floor
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64)
    trainer = L.Trainer(
        max_steps=MAX_STEPS, callbacks=[callback], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
        log_every_n_steps=1, default_root_dir=str(tmp_path),
    )  # fmt: skip
    trainer.fit(Tiny(), loader)
    return trainer


def test_lightning_callback_stops_the_trainer_at_the_instability(tmp_path):
    from logbook.callbacks import LogbookLightningCallback

    cb = LogbookLightningCallback(stop_on="critical")
    trainer = _lightning_fit(cb, bad=True, tmp_path=tmp_path)
    assert SPIKE < trainer.global_step <= SPIKE + 20 + 4  # checked at every step
    assert cb.stopped_by is not None and cb.stopped_by.severity == "critical"
    assert SPIKE <= (cb.stopped_by.start_step or cb.stopped_by.step) <= SPIKE + 4


def test_lightning_callback_lets_a_healthy_run_finish(tmp_path):
    from logbook.callbacks import LogbookLightningCallback

    cb = LogbookLightningCallback(stop_on="critical")
    trainer = _lightning_fit(cb, bad=False, tmp_path=tmp_path)
    assert trainer.global_step == MAX_STEPS
    assert cb.stopped_by is None
    assert [f.kind for f in cb.findings if f.severity == "critical"] == []


def test_a_bad_stop_level_is_refused():
    from logbook.callbacks._core import Watcher

    with pytest.raises(ValueError, match="stop_on 'info'"):
        Watcher(stop_on="info")
