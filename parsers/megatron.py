"""Placeholder: being written."""

from __future__ import annotations

import polars as pl

from logbook.parsed import Parsed

NAME = "megatron"
DESCRIPTION = ""
EXAMPLE = ""
MAPS = ""


def sniff(head: list[str]) -> int:
    return 0


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    raise NotImplementedError
