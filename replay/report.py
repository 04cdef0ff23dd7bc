"""The counterfactual's table (markdown and JSON) and its comparison figure (PNG)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from logbook.atomic import atomic_open, atomic_path
from logbook.run import Run
from replay.experiment import Outcome, outcome_dicts
from replay.stats import Spread, mean_difference, rate_difference, spread, wilson


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
    """One row per variant over its seeds: spike rate with its 95% interval, steps from
    the window's start to the spike, final loss mean +- sd, max loss, worst attention
    logit, steps lost; then the effect of each variant against the baseline."""
    head = (
        "| variant | runs | spikes (95% CI) | steps to spike | final loss (mean ± sd) "
        "| max loss (mean) | max attn logit | steps lost (mean) |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    groups = _groups(outcomes)
    for variant, group in groups.items():
        spikes = sum(o.spike for o in group)
        lo, hi = wilson(spikes, len(group))
        attn = [o.max_attn_logit for o in group if o.max_attn_logit is not None]
        to_spike = spread([o.spike_step - o.from_step for o in group if o.spike_step])
        rows.append(
            f"| {variant} | {len(group)} | {spikes}/{len(group)} ({lo:.2f}-{hi:.2f}) "
            f"| {_pm(to_spike, 0)} | {_pm(spread([o.final_loss for o in group]))} "
            f"| {_num(spread([o.max_loss for o in group]).mean)} "
            f"| {_num(max(attn) if attn else None, 1)} "
            f"| {_num(spread([float(o.steps_lost) for o in group]).mean, 1)} |"
        )
    effects = effect_table(groups)
    return "\n".join(rows) + ("\n\n" + effects if effects else "")


def effect_table(groups: dict[str, list[Outcome]]) -> str:
    """Each variant against the baseline (the one named ``baseline``, else the first):
    the difference in spike rate (Newcombe's 95% interval) and in mean final loss
    (Welch's 95% interval); empty with one variant."""
    if len(groups) < 2:
        return ""
    base_name = "baseline" if "baseline" in groups else next(iter(groups))
    base = groups[base_name]
    k0, n0 = sum(o.spike for o in base), len(base)
    loss0 = spread([o.final_loss for o in base])
    rows = [
        f"| against {base_name} | spike rate difference (95% CI) "
        "| final loss difference (95% CI) |\n|---|---|---|"
    ]
    for variant, group in groups.items():
        if variant == base_name:
            continue
        d, lo, hi = rate_difference(sum(o.spike for o in group), len(group), k0, n0)
        diff = mean_difference(spread([o.final_loss for o in group]), loss0)
        loss = "-" if diff is None else f"{diff[0]:+.3f} ({diff[1]:+.3f} to {diff[2]:+.3f})"
        rows.append(f"| {variant} | {d:+.2f} ({lo:+.2f} to {hi:+.2f}) | {loss} |")
    return "\n".join(rows)


def summary_dicts(outcomes: list[Outcome]) -> list[dict]:
    """The summary table's figures per variant, for ``results.json`` readers."""
    out = []
    for variant, group in _groups(outcomes).items():
        spikes = sum(o.spike for o in group)
        loss = spread([o.final_loss for o in group])
        to_spike = spread([o.spike_step - o.from_step for o in group if o.spike_step])
        out.append(
            {
                "variant": variant,
                "runs": len(group),
                "spikes": spikes,
                "spike_rate_ci95": list(wilson(spikes, len(group))),
                "steps_to_spike_mean": to_spike.mean,
                "steps_to_spike_sd": to_spike.sd,
                "final_loss_mean": loss.mean,
                "final_loss_sd": loss.sd,
                "steps_lost_mean": spread([float(o.steps_lost) for o in group]).mean,
            }
        )
    return out


def _groups(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.variant, []).append(o)
    return groups


def _pm(s: Spread, digits: int = 3) -> str:
    if s.mean is None:
        return "-"
    if s.sd is None:
        return _num(s.mean, digits)
    return f"{_num(s.mean, digits)} ± {_num(s.sd, digits)}"


def write_tables(outcomes: list[Outcome], out: Path, header: str) -> str:
    """Write ``table.md`` and ``results.json``; return the markdown."""
    text = f"{header}\n\n{summary_table(outcomes)}\n\n{per_run_table(outcomes)}\n"
    with atomic_open(out / "table.md", "w") as fh:
        fh.write(text)
    with atomic_open(out / "results.json", "w") as fh:
        fh.write(json.dumps(outcome_dicts(outcomes), indent=1) + "\n")
    with atomic_open(out / "summary.json", "w") as fh:
        fh.write(json.dumps(summary_dicts(outcomes), indent=1) + "\n")
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
