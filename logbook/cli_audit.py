"""``logbook audit`` and ``logbook query``: a fleet of runs into a store, and SQL over it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from logbook.errors import UsageError

QUERY_TABLES = ("runs", "metrics", "events", "findings")

# ``--ray ADDRESS`` arrives as this (see logbook.executor.ray_argv)
RayAddressOpt = Annotated[
    str | None, typer.Option("--ray-address", hidden=True, help="The Ray cluster's address.")
]


def register(app: typer.Typer) -> None:
    """Add the commands to the app."""
    app.command("audit")(audit)
    app.command("query")(query)


def audit(
    inputs: Annotated[
        list[str], typer.Argument(help="Log files, folders of launch files, or globs.")
    ],
    store: Annotated[Path, typer.Option("--store", help="Folder of the run store.")],
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="Worker processes (default: CPU count); with --ray, its CPUs."
        ),
    ] = None,
    ray: Annotated[
        bool,
        typer.Option(
            "--ray",
            help="Run on Ray: --ray ADDRESS, or alone for RAY_ADDRESS, a cluster started "
            "here, or else a local instance.",
        ),
    ] = False,
    ray_address: RayAddressOpt = None,
    split_mib: Annotated[
        float,
        typer.Option(
            "--split-mib",
            help="A folder of launch files this large (MiB) is parsed one task per file.",
        ),
    ] = 256.0,
) -> None:
    """Parse and audit every run of the inputs into a store of Parquet tables (runs.parquet,
    metrics/, events/, findings/); inputs unchanged since the last audit are not read
    again; an input that cannot be read is kept in runs.parquet with its error. Inputs
    are paths, globs, or s3://, gs://, az:// URLs (with fsspec and its backend)."""
    from logbook.executor import wanted
    from logbook.store import audit as do_audit
    from logbook.store.audit import progress_printer

    address = wanted(ray, ray_address, workers is not None)
    if split_mib < 0:
        raise UsageError("--split-mib must be >= 0")
    s = do_audit(inputs, store, workers, progress_printer(), ray=address, split_mib=split_mib)
    typer.echo(
        f"{store}: {s.inputs:,} input(s), {s.audited:,} audited, {s.unchanged:,} unchanged; "
        f"{s.runs:,} run(s), {s.failed:,} unreadable; {s.seconds:.1f} s"
    )


def query(
    store: Annotated[Path, typer.Argument(help="A run store written by `logbook audit`.")],
    sql: Annotated[
        str, typer.Argument(help="SQL over the tables runs, metrics, events, findings.")
    ],
    csv: Annotated[bool, typer.Option("--csv", help="Print the result as CSV.")] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the result to a .csv or .parquet.")
    ] = None,
) -> None:
    """Run SQL (polars' dialect) over the store's tables; print the result as a table."""
    import polars as pl

    from logbook.atomic import atomic_path, require_folder
    from logbook.store.index import read_index

    if not (store / "runs.parquet").exists():
        raise UsageError(f"{store}: not a run store (no runs.parquet)")
    ctx = pl.SQLContext(runs=read_index(store).lazy())
    for table in QUERY_TABLES[1:]:
        ctx.register(table, _table(store, table))
    try:
        result = ctx.execute(sql).collect()
    except (pl.exceptions.PolarsError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"query: {first}") from None
    if output is not None:
        suffix = output.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise UsageError(f"--output {output}: expected a .csv or .parquet file")
        require_folder(output)
        with atomic_path(output) as tmp:
            result.write_csv(tmp) if suffix == ".csv" else result.write_parquet(tmp)
        typer.echo(f"wrote {result.height:,} row(s) to {output}")
        return
    if csv:
        sys.stdout.write(result.write_csv())
        return
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=80, tbl_width_chars=200):
        typer.echo(str(result))


def _table(store: Path, table: str):
    import polars as pl

    folder = store / table
    if not any(folder.glob("run_id=*/part.parquet")):
        return pl.LazyFrame(schema={"run_id": pl.String})
    return pl.scan_parquet(
        folder / "**" / "*.parquet",
        hive_partitioning=True,
        missing_columns="insert",
        extra_columns="ignore",
    )
