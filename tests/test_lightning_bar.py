"""PyTorch Lightning's console bar: the step is the bar's batch count, and a callback
message glued onto a bar is no part of its record."""

from __future__ import annotations

import math

from _rows import parse_accounted

import parsers
from parsers import lightning_bar

BAR = "█" * 20
GLUED = (
    "Using 16bit None Automatic Mixed Precision (AMP)\n"
    "GPU available: True (cuda), used: True\n"
    f"Epoch 0:  50%|{BAR}▍     | 1007/2015 [04:03<04:03,  4.14it/s, loss=nan, v_num=Epoch 0, "
    "global step 51: 'val_accuracy' reached 0.02055 (best 0.02055), saving model to "
    "'/out/epoch=0-step=51.ckpt' as top 3\n"
    f"Epoch 0: 100%|{BAR}▉| 2014/2015 [08:13<00:00,  4.08it/s, loss=nan, v_num=Epoch 0, "
    "global step 103: 'val_accuracy' reached 0.02055 (best 0.02055), saving model to "
    "'/out/epoch=0-step=103.ckpt' as top 3\n"
    f"Epoch 0: 100%|{BAR}| 2015/2015 [08:24<00:00,  3.99it/s, loss=nan, v_num=]`Trainer.fit` "
    "stopped: `max_epochs=1` reached.\n"
    f"Epoch 1:  10%|{BAR}| 300/2015 [01:00<05:00,  4.00it/s, loss=2.5, v_num=0]\n"
)


def test_glued_checkpoint_messages_leave_the_bar_its_batch_step():
    parsed = parse_accounted(lightning_bar, GLUED)
    m = parsed.metrics
    assert m.get_column("step").to_list() == [1007, 2014, 2015, 2315]
    assert m.get_column("line").to_list() == [3, 4, 5, 6]
    loss = m.get_column("loss").to_list()
    assert all(math.isnan(x) for x in loss[:3]) and loss[3] == 2.5
    assert not {"best", "as_top", "max_epochs"} & set(m.columns)
    assert parsed.meta["caveats"] == [
        "steps are the bar's batches (epoch * N + n), not Lightning's global step: the "
        "checkpoint message after batch 1007 says global step 51 (about 19.7 batches an "
        "optimizer step)"
    ]


def test_no_caveat_where_the_global_step_is_the_bar_step():
    text = (
        f"Epoch 0: 100%|{BAR}| 25/25 [01:54<00:00,  0.22it/s, v_num=0, train_loss_step=1.310]"
        "Epoch 0, global step 25: 'val_loss' reached 0.77609 (best 0.77609), saving model "
        "to '/app/best.ckpt' as top 1\n"
        f"Epoch 1: 100%|{BAR}| 25/25 [01:51<00:00,  0.22it/s, v_num=0, train_loss_step=0.817]\n"
    )
    parsed = parse_accounted(lightning_bar, text)
    assert parsed.metrics.get_column("step").to_list() == [25, 50]
    assert parsed.metrics.get_column("loss").to_list() == [1.310, 0.817]
    assert "caveats" not in parsed.meta


def test_sniffed_by_its_bar_and_banner(tmp_path):
    head = GLUED.splitlines()
    assert lightning_bar.sniff(head) == 50
    assert lightning_bar.sniff(head[:2]) == 40
    assert lightning_bar.sniff(["step 1 | loss 2.0", "step 2 | loss 1.9"]) == 0
    log = tmp_path / "fit.log"
    log.write_text(GLUED)
    run = parsers.read_log(log)
    assert run.meta.format == "lightning-bar"
    assert run.metrics.get_column("step").to_list() == [1007, 2014, 2015, 2315]
