"""The run store: every run of a fleet parsed and audited once, kept as Parquet tables.

``logbook audit INPUT... --store DIR`` writes::

    DIR/runs.parquet                      one row per run (see ``index.SCHEMA``)
    DIR/metrics/run_id=<id>/part.parquet  the run's metrics
    DIR/events/run_id=<id>/part.parquet   its events (``logbook.event_table`` columns,
                                          plus cause, lost_steps, resume_step, count)
    DIR/findings/run_id=<id>/part.parquet its findings (``logbook.findings`` columns)

The per-run folders are Hive partitions: ``polars.scan_parquet(DIR / "findings",
hive_partitioning=True)``, DuckDB's ``read_parquet('DIR/findings/*/*.parquet',
hive_partitioning=true)`` and Spark read them as they are. Every file is written to a
temporary name and renamed; the index last, so a store is readable at any moment. An
input whose path, size and modification time (or, failing those, content hash) are in
the index is not read again.
"""

from logbook.store.audit import AuditSummary, audit
from logbook.store.index import read_index

__all__ = ["AuditSummary", "audit", "read_index"]
