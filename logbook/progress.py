"""A count of work done, told on stderr: one redrawn line on a terminal, a line every
10% otherwise (a log file, CI)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO


def counter(label: str, stream: TextIO | None = None) -> Callable[[int, int], None]:
    """``show(done, total)`` that writes ``label`` with ``{done}`` and ``{total}``
    filled in (``"audited {done}/{total} inputs"``)."""
    out = stream or sys.stderr
    tty = out.isatty()

    def show(done: int, total: int) -> None:
        text = label.format(done=f"{done:,}", total=f"{total:,}")
        if tty:
            out.write(f"\r{text}")
            if done == total:
                out.write("\n")
        elif total and (done == total or done % max(1, total // 10) == 0):
            out.write(f"{text}\n")
        out.flush()

    return show
