"""The report's sections, as blocks: summary, figures, restarts and goodput, remedies,
findings, events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logbook.report.blocks import (
    Code,
    Document,
    Heading,
    Image,
    Items,
    KeyValues,
    Para,
    TableBlock,
    integer,
    percent,
    seconds,
)
from logbook.report.goodput import Goodput
from logbook.report.incidents import onset
from logbook.report.remedies import LR_CUT, Remedy
from logbook.report.summary import Summary, unit_notes
from logbook.report.tables import Cell, Table, num, source_text

if TYPE_CHECKING:
    from logbook.report import Report


def document(r: Report) -> Document:
    doc = Document(title=r.title)
    doc.add(Heading(1, r.title))
    doc.add(Para(glance(r)))
    _summary(doc, r.summary)
    _figures(doc, r)
    _goodput(doc, r.goodput)
    _remedies(doc, r)
    doc.add(Heading(2, "Findings", "findings"))
    doc.add(Para("Click a column heading to sort. Source: the record at the finding's step."))
    doc.add(TableBlock(r.finding_table, "findings-table"))
    _omitted(doc, r.finding_table, "findings")
    doc.add(Heading(2, "Events", "events"))
    doc.add(TableBlock(r.event_table, "events-table"))
    _omitted(doc, r.event_table, "events")
    if r.notes_apart is not None and r.notes_apart.rows:
        doc.add(Heading(2, "Chronicle notes not on the log's steps", "notes-apart"))
        doc.add(
            Para(
                "What the chronicle tells of steps the log does not hold (or without a step "
                "it could be placed at): kept here, off the timeline and the findings."
            )
        )
        doc.add(TableBlock(r.notes_apart, "notes-apart-table"))
        _omitted(doc, r.notes_apart, "notes")
    return doc


def glance(r: Report) -> str:
    """One sentence: incidents, restarts and their cost, goodput."""
    n = len(r.incidents)
    parts = [f"{n} critical incident(s)" if n else "no critical incident"]
    if r.incidents:
        parts[0] += " (" + "; ".join(i.label for i in r.incidents[:3])
        parts[0] += ", ...)" if n > 3 else ")"
    g = r.goodput
    if g.restarts:
        cost = sum(x.cost_s or 0.0 for x in g.restarts)
        parts.append(
            f"{len(g.restarts)} restart(s), {g.failures} after a crash, costing {seconds(cost)}"
        )
    else:
        parts.append("no restart")
    if g.goodput is not None and g.wall_estimated:
        # no clock: the time between launches is unknown, so the figure is a bound
        parts.append(f"goodput at most {percent(g.goodput)} (no timestamps: an upper bound)")
    elif g.goodput is not None:
        text = f"goodput {percent(g.goodput)}"
        if g.modelled_optimal is not None:
            text += f" ({percent(g.modelled_optimal)} modelled at the Young–Daly interval)"
        parts.append(text)
    return "; ".join(parts) + "."


def _omitted(doc: Document, t: Table, what: str) -> None:
    if t.omitted:
        doc.add(
            Para(
                f"{t.omitted:,} more {what} not listed here (`logbook detect --json` or "
                "`logbook parse -o run.jsonl` lists them all).",
                "warn",
            )
        )


def _summary(doc: Document, s: Summary) -> None:
    doc.add(Heading(2, "Run", "run"))
    steps = f"{s.first_step}..{s.last_step}" if s.first_step is not None else "none"
    pairs = [
        ("run", s.name or "(unnamed)"),
        ("format", s.formats or "unknown"),
        ("sources", ", ".join(s.sources) or "none"),
        ("records", f"{s.records:,} ({s.trajectory_steps:,} on the final trajectory)"),
        ("steps", steps),
        ("segments (launches)", str(s.segments)),
        ("log interval", f"{s.interval} step(s)" if s.interval else "unknown"),
        ("samples consumed", integer(s.samples)),
        ("tokens consumed", integer(s.tokens)),
        ("first record", s.start.strftime("%Y-%m-%d %H:%M:%S UTC") if s.start else "no time"),
        ("last record", s.end.strftime("%Y-%m-%d %H:%M:%S UTC") if s.end else "no time"),
        ("wall time", seconds(s.wall_s)),
        ("findings", ", ".join(f"{n} {k}" for k, n in s.findings.items())),
        ("events", ", ".join(f"{k} {n}" for k, n in s.events.items()) or "none"),
    ]
    if s.unrecognized_lines:
        pairs.append(("unrecognized lines", f"{s.unrecognized_lines:,} (see `logbook parse`)"))
    doc.add(KeyValues(pairs))
    units = unit_notes(s.units)
    if units:
        doc.add(Heading(3, "Units"), Items(units))
    doc.add(Heading(3, "What this log cannot show well"))
    doc.add(Items(s.warnings, "warn") if s.warnings else Para("Nothing noted."))


def _figures(doc: Document, r: Report) -> None:
    doc.add(Heading(2, "Figures", "figures"))
    if not r.figures:
        doc.add(Para(r.figures_note or "Figures were not drawn."))
        return
    for fig in r.figures:
        if fig.name != "overview":
            doc.add(Heading(3, fig.title))
        doc.add(Image(fig))
    if r.undrawn_incidents:
        doc.add(
            Para(
                f"{r.undrawn_incidents} more incident(s) are not drawn (the "
                f"{len(r.figures) - 1} largest are); all are in the findings table.",
                "warn",
            )
        )


def _restart_table(g: Goodput) -> Table:
    t = Table(
        [
            "#",
            "step",
            "segment",
            "resumed after",
            "last step before",
            "recomputed steps",
            "gap",
            "recompute cost",
            "total cost",
            "cause",
            "source",
        ]
    )
    for i, x in enumerate(g.restarts, 1):
        t.rows.append(
            [
                num(i),
                num(x.step),
                num(x.segment),
                num(x.resume_step),
                num(x.last_step_before),
                num(x.lost_steps),
                num(x.gap_s, seconds(x.gap_s) if x.gap_s is not None else None),
                num(x.recompute_s, seconds(x.recompute_s) if x.recompute_s is not None else None),
                num(x.cost_s, seconds(x.cost_s) if x.cost_s is not None else None),
                Cell(x.cause or "none seen (deliberate?)"),
                Cell(source_text(x.source)),
            ]
        )
    return t


def _goodput(doc: Document, g: Goodput) -> None:
    doc.add(Heading(2, "Restarts and goodput", "goodput"))
    if g.restarts:
        doc.add(TableBlock(_restart_table(g), "restarts-table"))
    else:
        doc.add(Para("No restart: the run is one launch."))
    steps = f"{g.interval_steps:g} steps" if g.interval_steps is not None else "unknown"
    yd = seconds(g.young_daly_s)
    if g.young_daly_steps is not None:
        yd += f" = {g.young_daly_steps:,.0f} steps"
    pairs = [
        ("wall time W" + (" (estimated)" if g.wall_estimated else ""), seconds(g.wall_s)),
        ("median step time τ", seconds(g.step_time_s)),
        ("restart gaps G", seconds(g.gaps_s)),
        ("recomputed steps R", seconds(g.recompute_s)),
        ("checkpoint saves S", f"{g.saves} x {seconds(g.save_time_s)} = {seconds(g.saves_s)}"),
        ("useful time T = W − G − R − S", seconds(g.useful_s)),
        (
            "goodput T / W" + (" (upper bound: no timestamps)" if g.wall_estimated else ""),
            percent(g.goodput),
        ),  # fmt: skip
        ("failures F (restarts after a crash)", str(g.failures)),
        ("MTBF M = W / F", seconds(g.mtbf_s)),
        ("checkpoint interval τ_c", f"{steps} = {seconds(g.interval_s)}"),
        ("checkpoint save time δ (median)", seconds(g.save_time_s)),
        ("Young–Daly interval √(2δM)", yd),
        ("modelled goodput at τ_c", percent(g.modelled_actual)),
        ("modelled goodput at the Young–Daly interval", percent(g.modelled_optimal)),
    ]
    doc.add(KeyValues(pairs))
    doc.add(
        Para(
            "Modelled wall time at a checkpoint interval τ: W(τ) = T + δT/τ + F(R_f + τ/2)"
            " + D, with R_f the mean gap of a failure and D the cost of the deliberate "
            "restarts; modelled goodput T / W(τ). See docs/report.md."
        )
    )
    if g.notes:
        doc.add(Items(g.notes, "warn"))


def _remedies(doc: Document, r: Report) -> None:
    doc.add(Heading(2, "Remedies", "remedies"))
    if not r.remedies:
        doc.add(Para("No critical loss spike or divergence: nothing to rewind."))
        return
    doc.add(
        Para(
            "For each critical loss spike or divergence: the checkpoint to rewind to (the "
            "last one before the earliest precursor, where the loss scale was still >= 1 "
            "and the activation norm was not rising), the batches to skip (PaLM skipped "
            f"200-500 batches), and a cut of the peak learning rate (x{LR_CUT:g}). Test "
            "it on the small model first with the replay command."
        )
    )
    numbered = list(r.numbered_remedies())
    doc.add(TableBlock(_remedy_table(numbered), "remedies-table"))
    shown = [(n, m) for n, m in numbered if n in r.featured]
    if len(shown) < len(numbered):
        doc.add(
            Para(
                f"Flags and replay commands for the {len(shown)} largest incidents; the "
                f"table above has all {len(numbered)}.",
                "warn",
            )
        )
    for number, rem in shown:
        _remedy(doc, number, rem)


def _remedy_table(numbered: list[tuple[int, Remedy]]) -> Table:
    t = Table(["incident", "kind", "onset", "end", "earliest sign", "rewind to", "skip steps",
               "skip samples", "peak LR", "new LR"])  # fmt: skip
    for number, m in numbered:
        rewind = str(m.checkpoint_step) if m.checkpoint_step is not None else f"<= {m.rewind_step}"
        samples = f"{m.samples[0]}..{m.samples[1] - 1}" if m.samples else ""
        t.rows.append(
            [
                num(number),
                Cell(m.finding.kind),
                num(m.onset),
                num(m.end),
                num(m.earliest),
                Cell(rewind, float(m.rewind_step)),
                Cell(f"{m.skip_start}..{m.skip_end}", float(m.skip_start)),
                Cell(
                    samples + (" (est.)" if m.samples_estimated else ""),
                    float(m.samples[0]) if m.samples else None,
                ),  # fmt: skip
                num(m.peak_lr, f"{m.peak_lr:.3g}" if m.peak_lr is not None else None),
                num(m.new_lr, f"{m.new_lr:.3g}" if m.new_lr is not None else None),
            ]
        )
    return t


def _remedy(doc: Document, number: int, m: Remedy) -> None:
    f = m.finding
    doc.add(Heading(3, f"Incident {number}: {f.kind} at step {m.onset} ({f.severity})"))
    items = [f"{f.id}: {f.message}"] + [f"also {o.id}: {o.message}" for o in m.others]
    for p in m.precursors:
        lead = f", {p.lead_steps} steps ahead" if p.lead_steps is not None else ""
        items.append(f"precursor {p.id} from step {onset(p)}{lead}")
    doc.add(Items(items))
    todo = []
    if m.checkpoint_step is not None:
        where = f" ({m.checkpoint_path})" if m.checkpoint_path else ""
        todo.append(f"rewind to the checkpoint of step {m.checkpoint_step}{where}")
    else:
        todo.append(
            f"no usable checkpoint save in the log: rewind to the last checkpoint at or "
            f"before step {m.rewind_step}"
        )
    todo += [f"passed over the checkpoint of step {s}: {why}" for s, why in m.rejected]
    n = m.skip_end - m.skip_start + 1
    skip = f"skip the batches of steps {m.skip_start}..{m.skip_end} ({n} batches"
    if m.samples:
        est = ", estimated" if m.samples_estimated else ""
        skip += f"; samples {m.samples[0]:,}..{m.samples[1] - 1:,}{est}"
    todo.append(skip + ")")
    if m.peak_lr is not None:
        todo.append(f"cut the peak learning rate from {m.peak_lr:.3g} to {m.new_lr:.3g}")
    doc.add(Items(todo))
    for name, lines in m.commands.items():
        doc.add(Code(lines, name))
    doc.add(Code([m.replay], "test it on the small model first"))
