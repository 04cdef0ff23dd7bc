"""Replay engine benchmarks (same-run ratios) and the high-LR instability experiment.

    python -m bench.replay speed [--steps N] [--rounds R]    engine vs bare training loop
    python -m bench.replay checkpoint [--repeat R]           save + restore vs 100 steps
    python -m bench.replay parallel [--jobs J]               counterfactual, 4 variants x 3 seeds
    python -m bench.replay instability OUT                   record, detect, counterfactual

Every measurement runs the default model on one torch thread per process (the engine's
default): parallelism comes from processes. Timings interleave the two sides being
compared, so that load from other processes on the machine hits both alike.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from replay.checkpoint import CheckpointDir, restore
from replay.config import ReplayConfig
from replay.data import Stream
from replay.engine import Trainer, setup
from replay.experiment import counterfactual
from replay.interventions import parse_variant
from replay.model import GPT
from replay.optim import Schedule, adamw
from replay.recording import record

UNSTABLE = {"lr": 0.3, "warmup": 200}  # the instability experiment's settings
VARIANTS = ["half_lr=lr_scale:0.5", "skip_30=skip:+30", "clip_1=clip:1.0", "qk_norm=qk_norm"]


def _opt(args: list[str], name: str, default: int) -> int:
    return int(args[args.index(name) + 1]) if name in args else default


class BareLoop:
    """The same model, data, optimizer and schedule, without instrumentation or logging."""

    def __init__(self, cfg: ReplayConfig) -> None:
        t = cfg.train
        setup(t.device, t.threads)
        torch.manual_seed(0)
        self.model = GPT(cfg.model)
        self.opt = adamw(self.model, lr=t.lr, weight_decay=t.weight_decay,
                         betas=(t.beta1, t.beta2), eps=t.eps)  # fmt: skip
        self.schedule = Schedule(peak=t.lr, warmup=t.warmup, total=t.steps)
        self.data = Stream(cfg.data, cfg.model.vocab_size, cfg.model.block_size, t.batch_size)
        self.step = 0

    def run(self, n: int) -> None:
        for _ in range(n):
            self.step += 1
            for g in self.opt.param_groups:
                g["lr"] = self.schedule(self.step)
            x, y = self.data.batch(0, self.step)
            objective, _, _ = self.model(x, y)
            objective.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


def speed(args: list[str]) -> None:
    steps, rounds = _opt(args, "--steps", 100), _opt(args, "--rounds", 6)
    cfg = ReplayConfig()
    cfg.train.steps = steps * rounds
    bare, engine = BareLoop(cfg), Trainer(cfg)
    bare.run(10), engine.run(10)  # warm up both
    wall, cpu = {"bare": 0.0, "engine": 0.0}, {"bare": 0.0, "engine": 0.0}

    def timed(side: str, fn) -> None:
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall[side] += time.perf_counter() - w
        cpu[side] += time.process_time() - c

    for _ in range(rounds):
        timed("bare", lambda: bare.run(steps))
        timed("engine", lambda: engine.run(engine.step + steps))
    with tempfile.TemporaryDirectory() as tmp:  # the logging's final cost: build and write
        timed("engine", lambda: engine.to_run().write(Path(tmp) / "run.jsonl"))
    n = steps * rounds
    print(f"default model, {n} steps each, 1 thread, interleaved in {rounds} rounds")
    for side in ("bare", "engine"):
        print(f"{side:7} wall {wall[side] / n * 1e3:6.2f} ms/step ({n / wall[side]:.1f} steps/s), "
              f"cpu {cpu[side] / n * 1e3:6.2f} ms/step")  # fmt: skip
    print(f"engine overhead (instrumented, logged, written): wall "
          f"{(wall['engine'] / wall['bare'] - 1) * 100:+.1f}%, cpu "
          f"{(cpu['engine'] / cpu['bare'] - 1) * 100:+.1f}%  (limit +10%)")  # fmt: skip


def checkpoint(args: list[str]) -> None:
    repeat = _opt(args, "--repeat", 5)
    cfg = ReplayConfig()
    trainer = Trainer(cfg)
    trainer.run(10)
    with tempfile.TemporaryDirectory() as tmp:
        ckpts = CheckpointDir(tmp)
        ckpt, steps = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            ckpts.save(trainer.state_dict())
            restore(trainer, ckpts.load(trainer.step))
            t1 = time.perf_counter()
            trainer.run(trainer.step + 100)
            t2 = time.perf_counter()
            ckpt.append(t1 - t0)
            steps.append(t2 - t1)
        size = (Path(tmp) / "checkpoints" / f"step_{trainer.step - 100:08d}.pt").stat().st_size
    c, s = sorted(ckpt)[repeat // 2], sorted(steps)[repeat // 2]
    print(f"default model, checkpoint {size / 1e6:.2f} MB, medians of {repeat}")
    print(f"save + restore: {c * 1e3:.1f} ms; 100 logged steps: {s * 1e3:.0f} ms")
    print(f"ratio: {c / s * 100:.2f}% of one 100-step interval  (limit 10%)")


def _phrases(cfg: ReplayConfig) -> ReplayConfig:
    """The generated stream at batch 16, on which the instability experiment was made."""
    cfg.data.source, cfg.train.batch_size = "phrases", 16
    return cfg


def _recording(root: Path, steps: int, every: int) -> None:
    cfg = _phrases(ReplayConfig())
    cfg.train.lr, cfg.train.warmup, cfg.train.steps = UNSTABLE["lr"], UNSTABLE["warmup"], steps
    record(cfg, root, checkpoint_every=every)


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def available_parallelism(workers: int, n: int = 20_000_000) -> float:
    """Wall-time ratio of pure-Python work in ``workers`` processes vs one after the other
    (1/workers on idle cores): how much of the machine other load leaves us right now."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers, initializer=_burn, initargs=(1,)) as pool:
        pool.map(time.sleep, [2.0] * workers, chunksize=1)  # all workers up: time work only
        t0 = time.perf_counter()
        for _ in range(workers):
            _burn(n)
        t1 = time.perf_counter()
        pool.map(_burn, [n] * workers, chunksize=1)
        return (time.perf_counter() - t1) / (t1 - t0)


def parallel(args: list[str]) -> None:
    import resource

    jobs, repeat = _opt(args, "--jobs", 2), _opt(args, "--repeat", 1)
    variants = [parse_variant(v) for v in VARIANTS]
    print("counterfactual: 4 variants x 3 seeds, steps 51..200 (qk_norm: 1..200), default model")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rec"
        _recording(root, 50, 50)
        for r in range(repeat):
            control = available_parallelism(jobs)
            times, cores = {}, {}
            for workers in (1, jobs):
                c0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + time.process_time()
                t0 = time.perf_counter()
                counterfactual(root, Path(tmp) / f"cf{workers}", variants, 50, 200, 3, workers)
                times[workers] = time.perf_counter() - t0
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + time.process_time()
                cores[workers] = (c1 - c0) / times[workers]
            same = (Path(tmp) / "cf1" / "results.json").read_text() == (
                Path(tmp) / f"cf{jobs}" / "results.json"
            ).read_text()
            print(f"run {r + 1}: sequential {times[1]:.1f} s ({cores[1]:.2f} cores busy), "
                  f"--jobs {jobs} {times[jobs]:.1f} s ({cores[jobs]:.2f} cores busy): ratio "
                  f"{times[jobs] / times[1]:.3f} (limit 0.65); identical results: {same}; "
                  f"control {control:.2f} (pure-Python work in {jobs} processes vs one after "
                  f"the other; {1 / jobs:.2f} on idle cores)")  # fmt: skip


def instability(args: list[str]) -> None:
    from logbook.detectors import detect

    out = Path(args[0]) if args else Path("replay-instability")
    for name, qk in (("unstable", False), ("unstable-qk", True)):
        cfg = _phrases(ReplayConfig())
        cfg.train.lr, cfg.train.warmup, cfg.train.steps = UNSTABLE["lr"], UNSTABLE["warmup"], 200
        cfg.model.qk_norm = qk
        run = record(cfg, out / name, checkpoint_every=10)
        m = run.metrics
        print(f"{name}: max attention logit {m['attn_logit_max'].max():.4g}")
        for f in detect(run):
            if f.kind in ("loss_spike", "divergence", "attn_logit_drift"):
                lead = f" [precedes {f.precedes}, {f.lead_steps} steps]" if f.precedes else ""
                print(f"  {f.severity} {f.kind} {f.start_step}..{f.end_step}: {f.message}{lead}")
    variants = [parse_variant(v) for v in ["baseline=baseline", *VARIANTS]]
    _, text = counterfactual(out / "unstable", out / "cf", variants, 80, 200, 3, 2)
    print(text)


def presets(args: list[str]) -> None:
    """The healthy default over 5 seeds (warning findings), then each preset with a fix:
    its recording, and its counterfactual (baseline vs fix) over 5 seeds varying both
    init and data."""
    from logbook.detectors import detect
    from replay.presets import PRESETS

    out = Path(args[0]) if args else Path("replay-presets")
    seeds = _opt(args, "--seeds", 5)
    for seed in range(seeds):
        cfg = ReplayConfig()
        cfg.train.seed = seed
        run = record(cfg, out / f"healthy-seed{seed}", checkpoint_every=0)
        bad = [(f.kind, f.step) for f in detect(run) if f.severity != "info"]
        loss = run.metrics["loss"]
        print(f"healthy seed {seed}: loss {loss[0]:.3f} -> {loss.tail(10).mean():.3f}; {bad}")
    for p in PRESETS.values():
        if p.fix == "baseline":
            continue
        cfg = ReplayConfig.from_dict(p.apply(ReplayConfig().to_dict()))
        root = out / p.name
        record(cfg, root, checkpoint_every=p.checkpoint_every)
        variants = [parse_variant("baseline=baseline"), parse_variant(f"fix={p.fix}")]
        t0 = time.perf_counter()
        _, text = counterfactual(
            root, out / f"{p.name}-cf", variants, p.fix_from, cfg.train.steps, seeds, 2,
            vary="both",
        )  # fmt: skip
        print(f"## {p.name} ({time.perf_counter() - t0:.0f} s)\n{text}")


COMMANDS = {"speed": speed, "checkpoint": checkpoint, "parallel": parallel,
            "instability": instability, "presets": presets}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(__doc__)
        raise SystemExit(2)
    COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    main()
