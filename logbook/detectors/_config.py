"""Detector configuration from a TOML or JSON file and ``detector.field=value`` overrides.

The file holds one table per detector (and ``precursors``), e.g.::

    [loss_spike]
    z = 8
    [precursors]
    horizon_steps = 500

Unknown detectors, unknown keys and bad values are a :class:`UsageError` naming the key
and the valid ones.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from logbook.detectors import DETECTORS, PRECURSORS, DetectorConfig, PrecursorConfig
from logbook.errors import UsageError


def sections() -> dict[str, tuple[type[DetectorConfig], dict[str, Any]]]:
    """Config section name -> (model, entry defaults)."""
    out = {n: (d.config, d.defaults) for n, d in DETECTORS.items()}
    out[PRECURSORS] = (PrecursorConfig, {})
    return out


def read_config_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """The raw tables of a TOML (``.toml``) or JSON file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"config {p}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (ValueError, RecursionError, tomllib.TOMLDecodeError) as exc:
        first = str(exc).splitlines()[0]
        raise UsageError(
            f"config {p}: not valid {'JSON' if p.suffix == '.json' else 'TOML'} ({first})"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"config {p}: expected one table of settings per detector")
    return data


def parse_set(item: str) -> tuple[str, str, Any]:
    """``detector.field=value`` -> (detector, field, value); the value is read as JSON
    when it is valid JSON (numbers, true/false, lists), else as a string."""
    key, sep, raw = item.partition("=")
    name, dot, field = key.strip().partition(".")
    if not sep or not dot or not name or not field:
        raise UsageError(f"--set {item!r}: expected detector.field=value")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw.strip()
    return name, field.strip(), value


def build_config(
    tables: dict[str, dict[str, Any]] | None = None, sets: list[str] | None = None
) -> dict[str, DetectorConfig]:
    """Validated configs of the sections that were given (the others keep defaults)."""
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (tables or {}).items()}
    for item in sets or []:
        name, field, value = parse_set(item)
        merged.setdefault(name, {})[field] = value
    known = sections()
    out: dict[str, DetectorConfig] = {}
    for name, values in merged.items():
        if name not in known:
            raise UsageError(f"unknown detector {name!r} (valid: {', '.join(known)})")
        model, defaults = known[name]
        for key in values:
            if key not in model.model_fields:
                valid = ", ".join(model.model_fields)
                raise UsageError(f"unknown key {name}.{key} (valid keys of {name}: {valid})")
        try:
            out[name] = model(**{**defaults, **values})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise UsageError(f"bad value for {name}.{where}: {err['msg']}") from None
    return out
