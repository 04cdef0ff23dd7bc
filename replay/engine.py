"""The training engine: one step at a time, every step instrumented and logged.

Step ``k`` (1-based) trains on batch ``(seed, k)`` at ``lr(k)``; its metrics row is
logged with ``step = k``. Each step records the schema's metrics: ``loss`` (cross-entropy,
nats), ``lr``, ``grad_norm`` (before clipping), ``loss_scale`` and ``skipped`` (fp16
emulation only), ``act_norm`` (last layer) and ``act_norm_layer{i}``, ``param_norm``,
``attn_logit_max``, ``logz`` and ``step_time_s`` (wall clock: the only value that is not
reproducible). :meth:`Trainer.to_run` turns the log into a ``logbook.run.Run``.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import torch

from logbook.schema import EventBase, Restart
from replay import _runlog
from replay.config import ReplayConfig
from replay.data import Stream, mix
from replay.interventions import Plan
from replay.model import GPT, param_norm
from replay.optim import LossScaler, Schedule, adamw, clip_, grad_norm


def setup(device: str, threads: int) -> torch.device:
    """Deterministic execution: fixed thread count, deterministic kernels (and on CUDA,
    cuBLAS's fixed workspace, no TF32, no cuDNN autotuning)."""
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    dev = torch.device(device)
    if dev.type == "cuda":
        from logbook.errors import UsageError

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available")
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return dev


class Trainer:
    """The small model, its optimizer, schedule, loss scaler and data, and the step log."""

    def __init__(self, cfg: ReplayConfig, plan: Plan | None = None, name: str | None = None):
        self.cfg = cfg.check()
        t = cfg.train
        self.device = setup(t.device, t.threads)
        self.plan = plan or Plan()
        self.name = name
        self.model_cfg = replace(cfg.model, qk_norm=cfg.model.qk_norm or self.plan.qk_norm)
        torch.manual_seed(mix(t.seed, 0, 2))  # model init depends on the seed only
        self.model = GPT(self.model_cfg).to(self.device)
        self.params = list(self.model.parameters())
        betas = (t.beta1, t.beta2)
        self.optimizer = adamw(
            self.model, lr=t.lr, weight_decay=t.weight_decay, betas=betas, eps=t.eps
        )
        self.schedule = Schedule(
            peak=t.lr, warmup=t.warmup, total=t.steps, min_ratio=t.min_lr_ratio
        )
        self.scaler = (
            LossScaler(scale=t.init_scale, window=t.scale_window, min_scale=t.min_scale)
            if t.fp16
            else None
        )
        self.data = Stream(cfg.data, cfg.model.vocab_size, cfg.model.block_size, t.batch_size)
        self.step = 0  # last completed step
        self.segment = 0
        self.log = _runlog.StepLog(cfg.model.n_layer)
        self.events: list[EventBase] = []

    # ---- training --------------------------------------------------------------------

    def train_step(self) -> None:
        """Run step ``self.step + 1`` (or skip it, when the plan says so)."""
        k, seg, plan = self.step + 1, self.segment, self.plan
        self.step = k
        if plan.skipped(k, seg):
            self.log.skip(k, seg)
            return
        t0 = time.perf_counter()
        t = self.cfg.train
        if plan.resets_before(k, seg):
            self.optimizer.state.clear()
        lr = self.schedule(k) * plan.lr_factor(k, seg)
        beta2, eps = plan.beta2(k, t.beta2, seg), plan.eps(k, t.eps, seg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
            group["betas"], group["eps"] = (group["betas"][0], beta2), eps
        x, y = self.data.batch(plan.data_seed(k, t.seed, seg), k)
        x, y = x.to(self.device), y.to(self.device)
        scaler = self.scaler if not plan.bf16(k, seg) else None
        objective, ce, stats = self.model(
            x, y, z_loss=plan.z_loss(k, t.z_loss, seg), instrument=True, fp16=scaler is not None
        )
        (objective * scaler.scale if scaler else objective).backward()
        grads = [p.grad for p in self.params]
        overflow = scaler.unscale(grads) if scaler else False
        gnorm = grad_norm(grads) if not overflow else torch.full_like(ce, float("nan"))
        if not overflow:
            clip = plan.clip(k, t.clip, seg)
            if clip > 0:
                clip_(grads, gnorm, clip)
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        values = torch.stack(
            [ce, gnorm, param_norm(self.params), stats.attn_logit_max, stats.logz, *stats.act_norms]
        ).tolist()
        self.log.add(
            step=k,
            segment=self.segment,
            lr=lr,
            values=values,
            overflow=overflow,
            scale=scaler.scale if scaler else None,
            seconds=time.perf_counter() - t0,
        )

    def run(self, until: int, on_step=None) -> None:
        """Train up to and including step ``until``; ``on_step(trainer)`` after each."""
        while self.step < until:
            self.train_step()
            if on_step is not None:
                on_step(self)

    # ---- state -----------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The full state (references, not copies: see ``replay.checkpoint``)."""
        rng = {"torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        return {
            "format": "logbook-replay-checkpoint/1",
            "step": self.step,
            "segment": self.segment,
            "config": self.cfg.to_dict(),
            "plan": self.plan.to_list(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "rng": rng,
            "data": {"seed": self.cfg.train.seed, "next_step": self.step + 1},
        }

    def load_state_dict(self, state: dict) -> None:
        """Take over a state; the caller hands over tensors it will not touch again."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule = Schedule.from_dict(state["schedule"])
        if self.scaler is not None:
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["rng"]["cuda"], self.device)
        self.step = int(state["step"])

    def rewind_to(self, state: dict | None, cause: str | None = None) -> None:
        """Relaunch: go back to an earlier state (a private copy; None: continue from the
        current one), opening a new segment with its ``restart`` event."""
        last = self.step
        if state is not None:
            self.load_state_dict(state)
        self.segment += 1
        resume = self.step
        self.events.append(
            Restart(
                step=resume + 1,
                segment=self.segment,
                resume_step=resume,
                last_step_before=last,
                lost_steps=max(0, last - resume),
                cause=cause,
            )
        )

    def to_run(self):
        """The log so far as a ``logbook.run.Run``."""
        return _runlog.build_run(self)
