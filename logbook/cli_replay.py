"""``logbook replay``: record, verify, counterfactual, segment.

torch (through ``replay``) is imported only inside these commands, so the rest of the
command line starts fast and works without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from logbook.errors import UsageError

DirArg = Annotated[Path, typer.Argument(help="A run directory written by `replay record`.")]
FromOpt = Annotated[int, typer.Option("--from", help="The checkpoint step to start from.")]
VariantOpt = Annotated[
    list[str] | None,
    typer.Option("--variant", help="NAME=SPEC, e.g. half_lr=lr_scale:0.5 (repeatable)."),
]
SeedsOpt = Annotated[int, typer.Option("--seeds", help="Seeds per variant.")]
JobsOpt = Annotated[
    int | None, typer.Option("--jobs", "-j", help="Parallel processes (default: CPU count).")
]
RayOpt = Annotated[
    bool,
    typer.Option(
        "--ray",
        help="Run the variants x seeds on Ray: --ray ADDRESS, or alone for RAY_ADDRESS, a "
        "cluster started here, or else a local instance of --jobs CPUs.",
    ),
]
RayAddressOpt = Annotated[
    str | None, typer.Option("--ray-address", hidden=True, help="The Ray cluster's address.")
]
# the names of replay.presets.PRESETS (a test checks them), without importing replay
PRESET_NAMES = ("healthy", "data-spike", "fp16-attn-logits", "adam-second-moment")
DEFAULT_VARIANTS = (
    "baseline=baseline",
    "half_lr=lr_scale:0.5",
    "skip_30=skip:+30",
    "clip_1=clip:1.0",
    "qk_norm=qk_norm",
)


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command group to the app (a fresh group per call)."""
    group = typer.Typer(
        help="Replay instabilities on a small model: record, verify, counterfactual, segment.",
        no_args_is_help=True,
    )
    group.command("record")(record)
    group.command("resume")(resume)
    group.command("verify")(verify)
    group.command("counterfactual")(counterfactual)
    group.command("segment")(segment)
    app.add_typer(group, name="replay")


def _require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("replay needs torch: pip install 'logbook[replay]'") from None


def _config(path: Path | None, train: dict, model: dict, data: dict | None = None, preset=None):
    """Defaults, then the preset's settings, then the JSON config file, then the
    command-line options given."""
    from replay.config import ReplayConfig

    base = ReplayConfig().to_dict()
    if preset is not None:
        base = preset.apply(base)
    if path is not None:
        try:
            given = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            raise UsageError(f"--config {path}: not a readable JSON file ({exc})") from None
        if not isinstance(given, dict) or set(given) - {"model", "data", "train"}:
            raise UsageError(f"--config {path}: expected an object with model/data/train")
        for section, values in given.items():
            if not isinstance(values, dict):
                raise UsageError(f"--config {path}: {section} must be an object")
            base[section].update(values)
    base["train"].update({k: v for k, v in train.items() if v is not None})
    base["model"].update({k: v for k, v in model.items() if v is not None})
    base["data"].update({k: v for k, v in (data or {}).items() if v is not None})
    return ReplayConfig.from_dict(base).check()


def record(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the run.")],
    steps: Annotated[int | None, typer.Option(help="Training steps (default 300).")] = None,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate (default 2e-3).")] = None,
    warmup: Annotated[int | None, typer.Option(help="Linear warm-up steps (default 30).")] = None,
    seed: Annotated[int | None, typer.Option(help="Model init and data order (default 0).")] = None,
    qk_norm: Annotated[bool, typer.Option("--qk-norm", help="LayerNorm on queries/keys.")] = False,
    z_loss: Annotated[float | None, typer.Option(help="z-loss coefficient (default 0).")] = None,
    fp16: Annotated[bool, typer.Option("--fp16", help="Emulate fp16 loss scaling.")] = False,
    clip: Annotated[float | None, typer.Option(help="Max grad norm; 0: none (default).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Sequences per step (32).")] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option(help="Checkpoint interval; 0: ends only (default 50).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="Torch threads (default 1).")] = None,
    device: Annotated[str | None, typer.Option(help="cpu (default) or cuda.")] = None,
    config: Annotated[Path | None, typer.Option(help="JSON: model/data/train settings.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a recording in OUT.")] = False,
    preset: Annotated[
        str | None,
        typer.Option(help=f"A named recipe: {', '.join(PRESET_NAMES)} (docs/replay.md)."),
    ] = None,
    data: Annotated[
        str | None,
        typer.Option(help="stdlib (real text, default) or phrases (generated, faster)."),
    ] = None,
) -> None:
    """Train the small model from scratch; write OUT/run.jsonl and OUT/checkpoints/."""
    _require_torch()
    from replay.presets import preset as find_preset
    from replay.recording import RUN_FILE
    from replay.recording import record as do_record

    chosen = find_preset(preset) if preset else None
    if checkpoint_every is None:
        checkpoint_every = chosen.checkpoint_every if chosen else 50

    train = dict(steps=steps, lr=lr, warmup=warmup, seed=seed, z_loss=z_loss, clip=clip,
                 batch_size=batch_size, threads=threads, device=device,
                 fp16=True if fp16 else None)  # fmt: skip
    model = {"qk_norm": True if qk_norm else None}
    cfg = _config(config, train, model, {"source": data}, chosen)
    _check_out(out, force, RUN_FILE)
    run = do_record(cfg, out, checkpoint_every, preset=chosen.name if chosen else None)
    m = run.metrics
    typer.echo(
        f"recorded {m.height} steps in {out}: final loss {m['loss'][-1]:.4f}, "
        f"max attention logit {m['attn_logit_max'].max():.4g}, "
        f"{len(run.events_of('checkpoint_save'))} checkpoints"
    )
    if chosen is not None and chosen.fix != "baseline":
        typer.echo(
            f"preset {chosen.name}: its reported fix is `logbook replay counterfactual {out} "
            f"--from {chosen.fix_from} --variant fix={chosen.fix} -o CF_DIR`"
        )


def resume(root: DirArg) -> None:
    """Continue an interrupted ``replay record`` from its last checkpoint; the finished
    run equals an uninterrupted recording bit for bit (``replay verify`` checks it)."""
    _require_torch()
    from replay.recording import resume as do_resume

    run, start = do_resume(root)
    m = run.metrics
    typer.echo(
        f"resumed {root} from step {start}: {m.height} steps recorded, final loss "
        f"{m['loss'][-1]:.4f}, {len(run.events_of('checkpoint_save'))} checkpoints"
    )


def _check_out(out: Path, force: bool, run_file: str) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise UsageError(f"--out {out}: directory is not empty (--force replaces a recording)")
        ckpt = out / "checkpoints"
        for p in ckpt.glob("step_*.pt") if ckpt.is_dir() else []:
            p.unlink()
        for p in (ckpt / "index.json", out / run_file, out / "recording.json"):
            if p.exists():
                p.unlink()


def verify(
    root: DirArg,
    from_step: FromOpt,
    until: Annotated[int | None, typer.Option(help="Last step to compare (default: all).")] = None,
    change: Annotated[
        str | None, typer.Option(help="Apply SPEC from the next step (to see a departure).")
    ] = None,
) -> None:
    """Replay from a checkpoint; exit 0 if every metric of every step equals the recording
    bit for bit, else print the first differing step and metric and exit 1."""
    _require_torch()
    from replay.interventions import parse_spec
    from replay.recording import verify as do_verify

    result = do_verify(root, from_step, until, parse_spec(change) if change else None)
    a, b = result.steps
    if result.environment:
        typer.echo(
            "note: replayed with other settings than the recording ("
            + "; ".join(result.environment)
            + "): other kernels may round differently, so bits may differ"
        )
    if result.first is None:
        typer.echo(
            f"identical: steps {a}..{b} ({result.rows} steps, {len(result.metrics)} metrics) "
            f"replayed from the checkpoint at step {from_step} equal the recording bit for bit"
        )
        return
    typer.echo(f"differs: {result.first}")
    raise typer.Exit(1)


def _variants(specs: list[str] | None, default: tuple[str, ...]):
    from replay.interventions import parse_variant

    return [parse_variant(v) for v in (specs or default)]


def _workers(jobs: int | None) -> int:
    return jobs if jobs is not None else max(1, os.cpu_count() or 1)


def counterfactual(
    root: DirArg,
    from_step: FromOpt,
    until: Annotated[int, typer.Option("--until", help="Last step of every variant.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for runs, table, figure.")],
    variant: VariantOpt = None,
    seeds: SeedsOpt = 5,
    jobs: JobsOpt = None,
    vary: Annotated[
        str,
        typer.Option(
            help="What seeds vary: data (order after the checkpoint), init (trained from "
            "step 0 on the recorded batches), both."
        ),
    ] = "data",
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
) -> None:
    """From the checkpoint at --from, run each variant x seeds until --until; write
    OUT/table.md (per variant: spike rate with its 95% interval, steps to spike, final
    loss mean +- sd, effect against the baseline), OUT/results.json, OUT/summary.json,
    OUT/comparison.png and OUT/runs/."""
    _require_torch()
    from logbook.executor import wanted
    from replay.experiment import counterfactual as run_cf

    variants = _variants(variant, DEFAULT_VARIANTS)
    address = wanted(ray, ray_address, jobs is not None)
    _, text = run_cf(
        root, out, variants, from_step, until, seeds, _workers(jobs), vary, ray=address
    )
    typer.echo(text.rstrip())
    typer.echo(
        f"wrote {out / 'table.md'}, {out / 'results.json'}, {out / 'summary.json'}, "
        f"{out / 'comparison.png'}"
    )


def _sweep(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--lrs {text!r}: expected comma-separated numbers") from None
    if not values or any(not v > 0 for v in values):
        raise UsageError(f"--lrs {text!r}: expected LRs > 0")
    return values


def segment(
    logs: Annotated[list[Path], typer.Argument(help="Log files of one run.")],
    start: Annotated[int, typer.Option("--start", help="First recorded step of the segment.")],
    end: Annotated[int, typer.Option("--end", help="Last recorded step of the segment.")],
    steps: Annotated[int, typer.Option(help="Small-model steps for the segment.")] = 200,
    warmup: Annotated[int, typer.Option(help="Small-model warm-up steps before it.")] = 100,
    lr: Annotated[float, typer.Option(help="Small-model LR at the run's peak LR.")] = 0.1,
    seed: Annotated[int, typer.Option(help="First seed.")] = 0,
    variant: VariantOpt = None,
    seeds: SeedsOpt = 1,
    jobs: JobsOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write runs, table.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Log format.")] = None,
    config: Annotated[Path | None, typer.Option(help="JSON: small-model settings.")] = None,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="First sweep the small-model LR (--lrs) for the one at which the recorded "
            "segment reproduces the real instability; run the variants only there.",
        ),
    ] = False,
    lrs: Annotated[
        str, typer.Option(help="LRs of the --calibrate sweep, comma-separated.")
    ] = "0.01,0.03,0.1,0.3,1",
) -> None:
    """Drive the small model with a recorded segment's LR shape, LR cuts, clip changes,
    rewinds and skipped ranges; check that it reproduces the real run's instability, and
    only then report whether it goes unstable under the recorded actions, without them,
    and under each counterfactual."""
    _require_torch()
    from parsers import read_log
    from replay.segment import plan_segment
    from replay.segment_report import write_segment_report
    from replay.segment_run import run_segment

    run = read_log(list(logs), fmt)
    seg = plan_segment(run, start, end, steps=steps, warmup=warmup, peak_lr=lr)
    cfg = _config(config, {"seed": seed}, {})
    default = ("half_lr=lr_scale:0.5", "clip_1=clip:1.0", "qk_norm=qk_norm")
    if seg.fp16 or cfg.train.fp16:
        default += ("bf16=bf16",)  # the switch BLOOM made
    from logbook.executor import wanted

    address = wanted(ray, ray_address, jobs is not None)
    variants = _variants(variant, default)
    if calibrate:
        from replay.calibrate import calibrate as do_calibrate

        sweep = _sweep(lrs)
        cal = do_calibrate(run, start, end, cfg, steps, warmup, sweep, _workers(jobs), address)
        typer.echo("\n".join(cal.lines()))
        if cal.real is not None and cal.chosen is None:
            return
        if cal.chosen is not None:
            seg = plan_segment(run, start, end, steps=steps, warmup=warmup, peak_lr=cal.chosen)
        typer.echo("")
    outcomes = run_segment(seg, cfg, variants, seeds, _workers(jobs), out, ray=address)
    typer.echo(write_segment_report(seg, outcomes, out, [str(p) for p in logs], run).rstrip())
