"""A remedy written as the command-line flags of the framework that wrote the log.

Flag names as defined in each framework's argument parser:

- Megatron-DeepSpeed (BigScience fork, ``megatron/arguments.py``): ``--load DIR`` (resumes
  from the iteration named in ``latest_checkpointed_iteration.txt``, and DeepSpeed's
  ``latest`` tag, in DIR), ``--skip-train-iteration-range A-B`` (inclusive, 1-based
  iteration numbers, several ranges allowed), ``--override-lr-scheduler``, ``--lr``.
- Megatron-LM (NVIDIA): ``--load DIR``, ``--ckpt-step K`` (since 2024),
  ``--iterations-to-skip N [N ...]`` (single 1-based iterations, since 2025; there is no
  range flag upstream), ``--override-opt_param-scheduler`` (named
  ``--override-lr-scheduler`` before 2022), ``--lr``.
- metaseq: ``--restore-file``, ``--skip-batches A-B`` (comma-separated ranges of
  ``num_updates``), ``--reset-lr-scheduler``, ``--lr``.
- fairseq: ``--restore-file``, ``--reset-lr-scheduler``, ``--lr``; it has no option to
  skip batches.

The replay command is ``logbook replay segment`` on the run's own logs (its ``recorded``
and ``no_actions`` variants come with it), with the intervention syntax of the replay
variants (``skip:A-B`` in recorded steps, ``lr_scale:F``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logbook.report.remedies import Remedy

MEGATRON_DS = "Megatron-DeepSpeed"
MEGATRON_LM = "Megatron-LM"
METASEQ = "metaseq"
FAIRSEQ = "fairseq"
GENERIC = "any trainer"


def _fmt_lr(v: float | None) -> str:
    return "LR" if v is None else f"{v:.3g}"


def framework_commands(fmt: str | None, r: Remedy) -> dict[str, list[str]]:
    """Framework name -> the lines to add to its launch command (comments start ``#``)."""
    kind = (fmt or "").split("+")[0]
    if kind == "megatron":
        return {MEGATRON_DS: _megatron_ds(r), MEGATRON_LM: _megatron_lm(r)}
    if kind == "metaseq":
        return {METASEQ: _metaseq(r)}
    if kind == "fairseq-simple":
        return {FAIRSEQ: _fairseq(r)}
    return {GENERIC: _generic(r)}


def _where(r: Remedy) -> str:
    if r.checkpoint_step is not None:
        return f"the checkpoint of step {r.checkpoint_step}"
    return f"the last checkpoint saved at or before step {r.rewind_step}"


def _iteration(r: Remedy) -> str:
    return str(r.checkpoint_step) if r.checkpoint_step is not None else "ITER"


def _lr_note(r: Remedy, cut: str) -> str:
    if r.peak_lr is None:
        return f"# {cut}: set the peak learning rate below the one that spiked"
    return f"# {cut}: peak learning rate {r.peak_lr:.3g} -> {_fmt_lr(r.new_lr)}"


def _megatron_ds(r: Remedy) -> list[str]:
    ckpt = r.checkpoint_path or "CHECKPOINT_DIR"
    return [
        f"# rewind to {_where(r)}: write {_iteration(r)} into {ckpt}/latest_checkpointed_"
        f"iteration.txt and global_step{_iteration(r)} into {ckpt}/latest",
        _lr_note(r, "--override-lr-scheduler rebuilds the schedule from --lr"),
        f"--load {ckpt} --skip-train-iteration-range {r.skip_start}-{r.skip_end} "
        f"--override-lr-scheduler --lr {_fmt_lr(r.new_lr)}",
    ]


def _megatron_lm(r: Remedy) -> list[str]:
    ckpt = r.checkpoint_path or "CHECKPOINT_DIR"
    return [
        f"# rewind to {_where(r)}; --iterations-to-skip takes single iterations",
        _lr_note(r, "--override-opt_param-scheduler (older: --override-lr-scheduler)"),
        f"--load {ckpt} --ckpt-step {_iteration(r)} "
        f"--iterations-to-skip $(seq {r.skip_start} {r.skip_end}) "
        f"--override-opt_param-scheduler --lr {_fmt_lr(r.new_lr)}",
    ]


def _restore_file(r: Remedy) -> str:
    path = r.checkpoint_path
    if path and path.endswith(".pt"):
        return path
    base = path or "SAVE_DIR"
    return f"{base}/checkpoint_{_iteration(r)}.pt"


def _metaseq(r: Remedy) -> list[str]:
    return [
        f"# rewind to {_where(r)}",
        _lr_note(r, "--reset-lr-scheduler takes the schedule from --lr"),
        f"--restore-file {_restore_file(r)} --skip-batches {r.skip_start}-{r.skip_end} "
        f"--reset-lr-scheduler --lr {_fmt_lr(r.new_lr)}",
    ]


def _fairseq(r: Remedy) -> list[str]:
    return [
        f"# rewind to {_where(r)}; fairseq has no option to skip batches: leave steps "
        f"{r.skip_start}..{r.skip_end} out of the data instead",
        _lr_note(r, "--reset-lr-scheduler takes the schedule from --lr"),
        f"--restore-file {_restore_file(r)} --reset-lr-scheduler --lr {_fmt_lr(r.new_lr)}",
    ]


def _generic(r: Remedy) -> list[str]:
    samples = f" (samples {r.samples[0]}..{r.samples[1] - 1})" if r.samples else ""
    return [
        f"# rewind to {_where(r)}, skip the batches of steps {r.skip_start}..{r.skip_end}"
        f"{samples}, peak learning rate {_fmt_lr(r.new_lr)}",
    ]


def replay_command(r: Remedy, cut: float, sources: list[str] | None = None) -> str:
    """The ``logbook replay segment`` command that replays the incident's stretch of
    the real log on the small model, with the remedy's parts alone and together against
    the recorded actions (``sources``: the run's log files; ``LOG`` when unknown)."""
    skip = f"skip:{r.skip_start}-{r.skip_end}"
    lr = f"lr_scale:{cut:g}"
    until = max(r.skip_end, r.end) + 100
    logs = " ".join(_quoted(p) for p in sources) if sources else "LOG"
    return (
        f"logbook replay segment {logs} --start {r.rewind_step} --end {until} "
        f"--out remedy_{r.onset} --variant skip={skip} "
        f"--variant lr_cut={lr} --variant skip_lr_cut={skip},{lr}"
    )


def _quoted(path: str) -> str:
    import shlex

    return shlex.quote(path)
