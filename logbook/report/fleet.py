"""``logbook report STORE -o fleet.html``: the report of a whole run store.

One self-contained HTML file (or Markdown, without figures): a headline, a sortable
table of the runs (one row each, from ``runs.parquet``), and figures across runs drawn
from the store's tables (:mod:`logbook.report.fleet_figures`). Each readable run gets
its own report, written by the code ``logbook report LOG`` uses, into
``<output stem>_runs/<run_id>.html`` beside the fleet report, and its name in the table
links to it (see :mod:`logbook.report.fleet_runs` for how a run is read back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from logbook.errors import InputError, UsageError
from logbook.report.blocks import (
    Document,
    Heading,
    Image,
    Items,
    KeyValues,
    Para,
    TableBlock,
    percent,
)
from logbook.report.tables import Cell, Table, num
from logbook.store.index import INDEX, partition, read_index

RUNS_FOLDER = "{stem}_runs"  # the per-run reports, beside the fleet report
PLOTLY_JS = "plotly.min.js"  # one copy in the runs folder, shared by the per-run reports
RUN_TABLE = [
    "run", "input", "format", "records", "steps", "restarts", "lost steps", "goodput",
    "worst finding", "critical", "warning", "info", "caveats", "error",
]  # fmt: skip


@dataclass
class FleetWritten:
    """What a fleet report wrote."""

    path: Path
    runs: int
    unreadable: int
    folder: Path | None = None  # the per-run reports' folder (None: not written)
    reports: dict[str, int] = field(default_factory=dict)  # how a run was read -> reports
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run, why not written)
    figures: int = 0


def store_of(logs: list[Path]) -> Path | None:
    """The run store that ``logs`` is, when it is one folder holding ``runs.parquet``."""
    if len(logs) == 1 and logs[0].is_dir() and (logs[0] / INDEX).is_file():
        return logs[0]
    return None


def runs_folder(output: Path) -> Path:
    return output.parent / RUNS_FOLDER.format(stem=output.stem)


def write_fleet(
    store: Path,
    output: Path,
    fmt: str = "html",
    *,
    figures: bool = True,
    run_reports: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> FleetWritten:
    """Write the fleet report of ``store`` to ``output`` (``fmt``: html or md), and,
    first, the report of each readable run (``progress(done, total)`` after each)."""
    from logbook.atomic import atomic_open
    from logbook.report import REPORT_MODE

    index = ordered(read_index(store))
    unreadable = index.filter(pl.col("error").is_not_null()).height
    done = FleetWritten(output, index.height, unreadable)
    hrefs: dict[str, str] = {}
    if run_reports:
        hrefs = _run_reports(store, index, output, fmt, figures, progress, done)
    drawn = None
    if figures and fmt == "html":
        from logbook.report.fleet_figures import fleet_figures

        drawn = fleet_figures(index, *_fleet_tables(store, index))
        done.figures = sum(f.figure is not None for f in drawn)
    doc = fleet_document(store, index, hrefs, drawn, fmt, figures, done.failed)
    text = _render(doc, fmt)
    with atomic_open(output, "wb") as fh:
        fh.write(text.encode("utf-8"))
    output.chmod(REPORT_MODE)
    return done


def ordered(index: pl.DataFrame) -> pl.DataFrame:
    """The runs as the table lists them: the readable ones with the most critical, then
    warning findings first (then by input and place in it), the unreadable ones last."""
    return index.sort(
        [pl.col("error").is_not_null(), "critical", "warning", "input", "run_id"],
        descending=[False, True, True, False, False],
        nulls_last=True,
    )


def run_label(row: dict) -> str:
    """A run's name in the table: its name, or its input's (an unreadable one has none)."""
    return row["run"] or row["input"].rstrip("/").rsplit("/", 1)[-1]


def _run_reports(
    store: Path,
    index: pl.DataFrame,
    output: Path,
    fmt: str,
    figures: bool,
    progress: Callable[[int, int], None] | None,
    done: FleetWritten,
) -> dict[str, str]:
    """Write the report of every readable run; their links, relative to ``output``."""
    from logbook.report import build_report, write_report
    from logbook.report.fleet_runs import StoredRuns

    folder = runs_folder(output)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder}: is a file, not the folder of the run reports")
    rows = index.filter(pl.col("error").is_null()).sort("input", "run_id").to_dicts()
    if rows:
        folder.mkdir(exist_ok=True)
        done.folder = folder
    reader = StoredRuns(store)
    hrefs = {}
    if rows and fmt == "html" and figures:  # one copy of plotly.js for all the reports
        from logbook.atomic import atomic_open
        from logbook.report.interactive import plotly_js

        with atomic_open(folder / PLOTLY_JS, "wb") as fh:
            fh.write(plotly_js().encode("utf-8"))
    for k, row in enumerate(rows, 1):
        target = folder / f"{row['run_id']}.{'md' if fmt == 'md' else 'html'}"
        try:
            run, findings, how = reader.read(row)
            write_report(build_report(run, findings, figures=figures), target, fmt, PLOTLY_JS)
        except Exception as exc:  # (one run's report never stops the fleet's)
            done.failed.append((run_label(row), _why(exc)))
        else:
            hrefs[row["run_id"]] = f"{folder.name}/{target.name}"
            done.reports[how] = done.reports.get(how, 0) + 1
        if progress is not None:
            progress(k, len(rows))
    return hrefs


def _why(exc: Exception) -> str:
    why = (
        str(exc) if isinstance(exc, InputError) else f"internal error: {type(exc).__name__}: {exc}"
    )
    return (why.strip().splitlines() or ["error"])[0]


FINDING_COLUMNS = {"kind": pl.String, "precedes": pl.String, "lead_steps": pl.Int64}
EVENT_COLUMNS = {"kind": pl.String, "cause": pl.String, "lost_steps": pl.Int64}


def _fleet_tables(store: Path, index: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(findings, events) of the readable runs, the columns the figures use."""
    rids = index.filter(pl.col("error").is_null()).get_column("run_id").to_list()
    findings = _scan(store, "findings", rids, FINDING_COLUMNS)
    return findings, _scan(store, "events", rids, EVENT_COLUMNS)


def _scan(store: Path, table: str, rids: list[str], columns: dict) -> pl.DataFrame:
    schema = {"run_id": pl.String, **columns}
    files = [str(p) for p in (partition(store, table, r) for r in rids) if p.is_file()]
    if not files:
        return pl.DataFrame(schema=schema)
    try:
        lf = pl.scan_parquet(files, hive_partitioning=True, hive_schema={"run_id": pl.String()})
        return lf.select(pl.col(c).cast(t) for c, t in schema.items()).collect()
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{store / table}: not readable store tables ({first})") from None


def fleet_counts(index: pl.DataFrame) -> dict[str, int]:
    """Runs, readable or not, runs with alarms, restarts and lost steps, over the fleet."""
    ok = index.filter(pl.col("error").is_null())
    return {
        "runs": index.height,
        "readable": ok.height,
        "unreadable": index.height - ok.height,
        "critical": ok.filter(pl.col("critical") > 0).height,
        "warning": ok.filter(pl.col("warning") > 0).height,
        "restarts": int(ok.get_column("restarts").fill_null(0).sum()),
        "restarted": ok.filter(pl.col("restarts") > 0).height,
        "lost_steps": int(ok.get_column("lost_steps").fill_null(0).sum()),
    }


def headline(index: pl.DataFrame) -> list[tuple[str, str]]:
    """The facts at the top: runs, readable or not, alarms, restarts, lost steps."""
    n = fleet_counts(index)
    goodput = index.filter(pl.col("error").is_null()).get_column("goodput").drop_nulls()
    known = (
        f"median {percent(goodput.median())} over the {goodput.len():,} run(s) whose log's "
        "times give it"
        if goodput.len()
        else "unknown (no run's log gives the times it needs)"
    )
    return [
        ("runs", f"{n['runs']:,}"),
        ("readable", f"{n['readable']:,}"),
        ("unreadable", f"{n['unreadable']:,}"),
        ("runs with critical findings", f"{n['critical']:,}"),
        ("runs with warning findings", f"{n['warning']:,}"),
        ("restarts", f"{n['restarts']:,} (in {n['restarted']:,} run(s))"),
        ("lost steps", f"{n['lost_steps']:,}"),
        ("goodput", known),
    ]


def glance(index: pl.DataFrame) -> str:
    """One sentence: runs, how many could not be read, alarms, restarts."""
    n = fleet_counts(index)
    return (
        f"{n['runs']:,} run(s), {n['unreadable']:,} unreadable; {n['critical']:,} with "
        f"critical and {n['warning']:,} with warning findings; {n['restarts']:,} restart(s), "
        f"{n['lost_steps']:,} step(s) computed again after them."
    )


def run_table(index: pl.DataFrame, hrefs: dict[str, str]) -> Table:
    """One row per run; a readable run's name links to its report where one was written."""
    t = Table(list(RUN_TABLE))
    for r in index.iter_rows(named=True):
        name = Cell(run_label(r), href=hrefs.get(r["run_id"]))
        if r["error"] is not None:
            t.rows.append([name, Cell(r["input"]), *[Cell("") for _ in RUN_TABLE[2:-1]],
                           Cell(r["error"])])  # fmt: skip
            continue
        first, last = r["first_step"], r["last_step"]
        steps = Cell("none", None)
        if first is not None and last is not None:
            steps = Cell(f"{first:,}..{last:,}", float(last - first + 1))
        g = r["goodput"]
        t.rows.append(
            [
                name,
                Cell(r["input"]),
                Cell(r["format"] or ""),
                _count(r["records"]),
                steps,
                _count(r["restarts"]),
                _count(r["lost_steps"]),
                Cell("unknown") if g is None else num(g, percent(g)),
                Cell(r["worst"] or ""),
                _count(r["critical"]),
                _count(r["warning"]),
                _count(r["info"]),
                Cell("; ".join(r["caveats"] or [])),
                Cell(""),
            ]
        )
    return t


def _count(v: int | None) -> Cell:
    return num(v, None if v is None else f"{v:,}")


def fleet_document(
    store: Path,
    index: pl.DataFrame,
    hrefs: dict[str, str],
    drawn: list | None,
    fmt: str,
    figures: bool,
    failed: list[tuple[str, str]],
) -> Document:
    """The fleet report's blocks (``drawn``: the figures, None when not drawn)."""
    title = f"Fleet report: {Path(store).resolve().name}"
    doc = Document(title=title)
    doc.add(Heading(1, title), Para(glance(index)), KeyValues(headline(index)))
    if failed:
        doc.add(Para(f"{len(failed)} run report(s) could not be written:", "warn"))
        doc.add(Items([f"{run}: {why}" for run, why in failed], "warn"))
    doc.add(Heading(2, "Figures", "figures"))
    if not figures:
        doc.add(Para("Figures were not drawn (--no-figures)."))
    elif drawn is None:
        doc.add(Para("Figures are drawn in the HTML fleet report only (-o fleet.html)."))
    else:
        for f in drawn:
            doc.add(Heading(3, f.heading, f.anchor))
            if f.figure is not None:
                doc.add(Image(f.figure))
            if f.note:
                doc.add(Para(f.note))
    doc.add(Heading(2, "Runs", "runs"))
    how = ["One row per run of runs.parquet; steps: the first and last step logged."]
    if fmt == "html":
        how.append("Click a column heading to sort (steps by the number of steps).")
    if hrefs:
        how.append("A run's name opens its report.")
    doc.add(Para(" ".join(how)), TableBlock(run_table(index, hrefs), "runs-table"))
    return doc


def _render(doc: Document, fmt: str) -> str:
    if fmt == "html":
        from logbook.report.html import to_html

        return to_html(doc)
    from logbook.report.markdown import to_markdown

    return to_markdown(doc, "")


def fleet_command(
    store: Path, output: Path, fmt: str, unused: list[str], figures: bool, run_reports: bool
) -> None:
    """``logbook report STORE -o OUT``: write, and say what was written."""
    import typer

    if unused:
        raise UsageError(f"{', '.join(unused)}: not for a run store (its findings are stored)")
    w = write_fleet(
        store, output, fmt, figures=figures, run_reports=run_reports, progress=progress_printer()
    )
    typer.echo(
        f"wrote {w.path}: {w.runs:,} run(s) ({w.unreadable:,} unreadable), {w.figures} figure(s)"
    )
    if w.folder is not None:
        how = ", ".join(f"{n:,} {_HOW[k]}" for k, n in sorted(w.reports.items()))
        typer.echo(
            f"wrote {sum(w.reports.values()):,} run report(s) in {w.folder}"
            + (f" ({how})" if how else "")
        )
    for run, why in w.failed:
        typer.echo(f"logbook: warning: run {run}: no report ({why})", err=True)


_HOW = {"input": "read again from their inputs", "tables": "rebuilt from the store's tables"}


def progress_printer(stream=None) -> Callable[[int, int], None]:
    """``reports k/N`` on stderr (see :func:`logbook.progress.counter`)."""
    from logbook.progress import counter

    return counter("reports {done}/{total}", stream)
