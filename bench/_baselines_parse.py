"""What the parse benchmark compares logbook with: the obvious ways to read a log.

* ``regex_megatron`` / ``regex_metaseq``: a per-line Python loop (``re`` on every line,
  a dict per record, then a pandas DataFrame), as a quick analysis script would do.
* ``awk``: ``awk -F'|'`` counting record lines and summing a field; a floor for
  "just scan the bytes once".
* ``extract_payloads`` + ``read_json``: metaseq's JSON payloads written to their own
  file beforehand, then only ``pandas.read_json(lines=True)`` is timed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pandas as pd

MEGATRON_RECORD = re.compile(r"\biteration\s+(\d+)/\s*(\d+)\s*\|")
MEGATRON_FIELD = re.compile(r"\|\s*([A-Za-z][A-Za-z /()\-]*?):\s*([-+0-9.eEinfaINFA]+)\s*(?=\|)")
METASEQ_RECORD = re.compile(r"\| train_inner \| (\{.*\})\s*$")
AWK_PATTERN = {"megatron": "/ iteration /", "metaseq": "/ train_inner /"}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def regex_megatron(path: str | Path) -> pd.DataFrame:
    """Megatron records: one ``re`` search per line, then every ``key: value`` field."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            m = MEGATRON_RECORD.search(line)
            if m is None:
                continue
            row = {"line": number, "step": int(m.group(1))}
            for key, value in MEGATRON_FIELD.findall(line):
                row[key.strip()] = _number(value)
            rows.append(row)
    return pd.DataFrame(rows)


def regex_metaseq(path: str | Path) -> pd.DataFrame:
    """metaseq records: one ``re`` match per line, ``json.loads`` of the payload."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            m = METASEQ_RECORD.search(line)
            if m is None:
                continue
            row = {"line": number}
            for key, value in json.loads(m.group(1)).items():
                row[key] = _number(value) if isinstance(value, str) else value
            rows.append(row)
    return pd.DataFrame(rows)


REGEX = {"megatron": regex_megatron, "metaseq": regex_metaseq}


def awk(path: str | Path, fmt: str) -> int:
    """Count record lines (and sum field 7) with awk; returns the count."""
    prog = AWK_PATTERN[fmt] + "{n++; s+=$7} END{print n}"
    out = subprocess.run(
        ["awk", "-F|", prog, str(path)], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip() or 0)


def extract_payloads(path: str | Path, out: str | Path) -> int:
    """Write the JSON payload of every train_inner line to ``out``; returns the count."""
    n = 0
    with open(path, encoding="utf-8", errors="replace") as src, open(out, "w") as dst:
        for line in src:
            m = METASEQ_RECORD.search(line)
            if m is not None:
                dst.write(m.group(1) + "\n")
                n += 1
    return n


def read_json(path: str | Path) -> pd.DataFrame:
    """The payload file as pandas reads it."""
    return pd.read_json(path, lines=True)
