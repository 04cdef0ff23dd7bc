"""What the runs' logs say of their config, and which keys differ between runs.

Three places say it: the run's header (``run.meta``: the settings a trainer wrote, e.g.
a Hugging Face ``trainer_state``, ``train_iters``, or any config a stored logbook run
carries), the config lines the log echoes (``config_change`` events: ``Overriding:
batch_size = 32``), and the records themselves (peak learning rate, global batch size,
dynamic loss scaling). Only keys whose values differ between runs are shown; a key that
one run's log does not state counts as differing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from logbook.run import Run

# header fields that describe the log or the run's outcome, not its config
NOT_CONFIG = {
    "name", "format", "sources", "units", "caveats", "parse", "summary", "unplaced_notes",
    "lineage", "loss_window_averaged", "nonfinite_filtered", "sampled", "bucketed",
    "continued_lines", "rank_copies", "duplicate_records", "columns_from", "steps_numbered",
    "runs", "file", "lines",
}  # fmt: skip
NOT_SETTINGS = {"global_step", "total_flos", "best_metric", "best_model_checkpoint"}
MISSING = "(not in the log)"
NO_CONFIG = "no config in the logs"


@dataclass
class ConfigDiff:
    """The keys any run's log states (``keys``), and those whose values differ, each
    with its source and one value per run (None: not stated)."""

    keys: int = 0
    rows: list[tuple[str, str, list[str | None]]] = field(default_factory=list)

    @property
    def differing(self) -> list[str]:
        return [key for key, _, _ in self.rows]

    def sentence(self) -> str:
        """One line: how many keys, how many differ."""
        if not self.keys:
            return NO_CONFIG
        if not self.rows:
            return f"the runs agree on all {self.keys} config key(s) their logs state"
        return f"{len(self.rows)} of {self.keys} config key(s) differ"


def value_text(v: Any) -> str:
    """A config value as text: numbers in short form, other values as JSON."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int | str):
        return str(v)
    return json.dumps(v, sort_keys=True, default=str)


def _flatten(prefix: str, v: Any, out: dict[str, str]) -> None:
    if isinstance(v, dict):
        for k, item in v.items():
            if prefix == "trainer_state" and k in NOT_SETTINGS:
                continue
            _flatten(f"{prefix}.{k}" if prefix else str(k), item, out)
    elif v is not None:
        out[prefix] = value_text(v)


def meta_config(run: Run) -> dict[str, str]:
    """The config fields of the run's header, nested ones as ``a.b``."""
    out: dict[str, str] = {}
    extra = run.meta.model_extra or {}
    for key in sorted(extra):
        if key not in NOT_CONFIG:
            _flatten(key, extra[key], out)
    return out


def event_config(run: Run) -> dict[str, str]:
    """The config lines the log echoes; a key set more than once: ``a -> b``."""
    values: dict[str, list[str]] = {}
    for e in run.events_of("config_change"):
        seen = values.setdefault(e.key, [])
        text = value_text(e.new) if e.new is not None else ""
        if text and (not seen or seen[-1] != text):
            seen.append(text)
    return {k: " -> ".join(v) for k, v in sorted(values.items()) if v}


def record_config(run: Run) -> dict[str, str]:
    """What the records show: peak learning rate, global batch size (``a -> b`` where it
    changes), dynamic loss scaling."""
    m = run.metrics
    out: dict[str, str] = {}
    if "lr" in m.columns:
        lr = m.get_column("lr").filter(m.get_column("lr").is_finite())
        if lr.len():
            out["peak lr"] = value_text(float(lr.max()))
    if "batch_size" in m.columns:
        sizes = m.get_column("batch_size").drop_nulls()
        changes = sizes.filter((sizes != sizes.shift(1)).fill_null(True))
        if changes.len():
            out["batch_size"] = " -> ".join(str(v) for v in changes.to_list())
    if "loss_scale" in m.columns and m.get_column("loss_scale").drop_nulls().len():
        out["loss scaling"] = "dynamic (fp16)"
    return out


SOURCES = (("header", meta_config), ("log", event_config), ("records", record_config))


def config_diff(runs: list[Run]) -> ConfigDiff:
    """The config keys whose values differ between ``runs`` (in source order: header,
    echoed config, records; by name within each)."""
    diff = ConfigDiff()
    for source, read in SOURCES:
        per_run = [read(r) for r in runs]
        keys = sorted(set().union(*per_run))
        diff.keys += len(keys)
        for key in keys:
            values = [c.get(key) for c in per_run]
            if len(set(values)) > 1:
                diff.rows.append((key, source, values))
    return diff
