"""The counterfactual's table (markdown and JSON) and its comparison figure (PNG)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from logbook.atomic import atomic_open, atomic_path
from logbook.run import Run
from replay.experiment import Outcome, outcome_dicts


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1e4:
        return f"{v:.3g}"
    return f"{v:.{digits}f}"


def per_run_table(outcomes: list[Outcome]) -> str:
    head = (
        "| variant | seed | final loss | max loss | spike (per logbook detect) "
        "| max attn logit | steps lost |\n|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for o in outcomes:
        spike = f"yes, step {o.spike_step}" if o.spike else "no"
        rows.append(
            f"| {o.variant} | {o.seed} | {_num(o.final_loss)} | {_num(o.max_loss)} | {spike} "
            f"| {_num(o.max_attn_logit, 1)} | {o.steps_lost} |"
        )
    return "\n".join(rows)


def summary_table(outcomes: list[Outcome]) -> str:
    """One row per variant: means over seeds, spike count, worst attention logit."""
    head = (
        "| variant | runs | final loss (mean) | max loss (mean) | spikes | max attn logit "
        "| steps lost |\n|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for variant in dict.fromkeys(o.variant for o in outcomes):
        group = [o for o in outcomes if o.variant == variant]
        spikes = sum(o.spike for o in group)
        attn = [o.max_attn_logit for o in group if o.max_attn_logit is not None]
        rows.append(
            f"| {variant} | {len(group)} | {_num(_avg([o.final_loss for o in group]))} "
            f"| {_num(_avg([o.max_loss for o in group]))} | {spikes}/{len(group)} "
            f"| {_num(max(attn) if attn else None, 1)} | {max(o.steps_lost for o in group)} |"
        )
    return "\n".join(rows)


def _avg(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def write_tables(outcomes: list[Outcome], out: Path, header: str) -> str:
    """Write ``table.md`` and ``results.json``; return the markdown."""
    text = f"{header}\n\n{summary_table(outcomes)}\n\n{per_run_table(outcomes)}\n"
    with atomic_open(out / "table.md", "w") as fh:
        fh.write(text)
    with atomic_open(out / "results.json", "w") as fh:
        fh.write(json.dumps(outcome_dicts(outcomes), indent=1) + "\n")
    return text


def _window(run: Run, lo: int, until: int) -> pl.DataFrame:
    """Trajectory rows for every step lo+1..until; steps without a record are NaN (gaps)."""
    full = pl.DataFrame({"step": pl.int_range(lo + 1, until + 1, eager=True)})
    m = run.trajectory().select("step", "loss", "attn_logit_max")
    return full.join(m, on="step", how="left").fill_null(float("nan"))


def figure(outcomes: list[Outcome], out: Path, from_step: int, until: int, title: str = "") -> Path:
    """Loss and max attention logit per step, one colour per variant, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo = max(0, from_step - max(20, (until - from_step) // 2))
    fig, (ax_loss, ax_attn) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    colours = plt.get_cmap("tab10")
    for i, variant in enumerate(dict.fromkeys(o.variant for o in outcomes)):
        for j, o in enumerate(x for x in outcomes if x.variant == variant):
            m = _window(Run.read(out / o.run_file), lo, until)
            steps = m.get_column("step").to_numpy()
            style = dict(color=colours(i % 10), lw=1.0, alpha=0.85, ls=("-", "--", ":")[j % 3])
            label = variant if j == 0 else None
            ax_loss.plot(steps, m.get_column("loss").to_numpy(), label=label, **style)
            attn = m.get_column("attn_logit_max").to_numpy()
            ax_attn.plot(steps, attn, **style)
    for ax in (ax_loss, ax_attn):
        ax.axvline(from_step, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    ax_loss.set_ylabel("loss (nats)")
    ax_attn.set_ylabel("max attention logit")
    ax_attn.set_yscale("log")
    ax_attn.set_xlabel("step (dashed: the checkpoint; line styles: seeds)")
    ax_loss.legend(fontsize=8, ncol=2)
    if title:
        ax_loss.set_title(title, fontsize=10)
    fig.tight_layout()
    path = out / "comparison.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
