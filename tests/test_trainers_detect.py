"""``logbook detect`` end to end on runs trained here with a planted instability.

A tiny model is trained at a sane learning rate, then for a few steps at a far too
high one: the loss jumps and stays up. ``detect`` must find it from the trainer's own
output, with the format sniffed: a Hugging Face Trainer output directory (its
``checkpoint-N/trainer_state.json``; the test needs transformers) and nanoGPT stdout
(from ``fixtures/nanogpt/tiny_train.py``, a minimal loop printing nanoGPT's lines; the
test needs torch). For the HF run, ``detect`` also says that HF's loss is a window mean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import invoke

ROOT = Path(__file__).resolve().parents[1]
SPIKE = 40  # first step at the too-high learning rate


def train_hf(out: Path) -> None:
    """GPT-2 of one 32-wide layer on a repeating token pattern, 60 steps, learning rate
    x300 for steps 40-43 (a LambdaLR the Trainer steps), logging every 2 steps."""
    torch = pytest.importorskip("torch", reason="torch not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    pytest.importorskip("accelerate", reason="the Trainer needs accelerate")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    torch.set_num_threads(1)
    text = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3] * 200)
    data = [{"input_ids": text[i * 7 : i * 7 + 32], "labels": text[i * 7 : i * 7 + 32]}
            for i in range(64)]  # fmt: skip
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=16,
            n_positions=32,
            n_embd=32,
            n_layer=1,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
        )  # fmt: skip
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: 300.0 if SPIKE <= step < SPIKE + 4 else 1.0
    )
    args = TrainingArguments(
        output_dir=str(out), max_steps=60, per_device_train_batch_size=4, logging_steps=2,
        eval_strategy="steps", eval_steps=20, save_steps=30, report_to=[], use_cpu=True,
        seed=0, disable_tqdm=True, max_grad_norm=1e9,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=data, eval_dataset=data[:8],
        optimizers=(opt, sched),
    )  # fmt: skip
    trainer.train()


def findings(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def test_hf_output_directory(tmp_path, monkeypatch, capsys):
    out = tmp_path / "hf_out"
    train_hf(out)
    capsys.readouterr()  # the Trainer's own output
    assert (out / "checkpoint-60" / "trainer_state.json").is_file()
    code, text, err = invoke(monkeypatch, capsys, "detect", str(out), "--json")
    assert (code, err) == (0, "")
    found = {(f["kind"], f["severity"]) for f in findings(text)}
    assert ("loss_spike", "critical") in found and ("divergence", "critical") in found
    spike = next(f for f in findings(text) if f["kind"] == "loss_spike")
    assert SPIKE < spike["step"] <= SPIKE + 6  # logged every 2 steps, a window mean
    code, table, err = invoke(monkeypatch, capsys, "detect", str(out))
    assert (code, err) == (0, "")
    assert "(hf-trainer)" in table.splitlines()[0]
    assert "note: Hugging Face Trainer: each loss is the mean of the per-step losses" in table
    code, summary, _ = invoke(monkeypatch, capsys, "parse", str(out))
    assert code == 0 and "logging_steps=2" in summary


def test_nanogpt_stdout(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch", reason="torch not installed")
    script = ROOT / "fixtures" / "nanogpt" / "tiny_train.py"
    log = tmp_path / "train.log"
    res = subprocess.run(
        [sys.executable, str(script), "--iters", "70", "--spike-at", str(SPIKE)],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    log.write_text(res.stdout)
    code, text, err = invoke(monkeypatch, capsys, "detect", str(log), "--json", "--fail-on",
                             "critical")  # fmt: skip
    assert (code, err) == (1, "")  # a critical finding
    spike = next(f for f in findings(text) if f["kind"] == "loss_spike")
    assert spike["severity"] == "critical" and SPIKE < spike["step"] <= SPIKE + 2
    code, table, _ = invoke(monkeypatch, capsys, "detect", str(log))
    assert "(nanogpt)" in table.splitlines()[0]
