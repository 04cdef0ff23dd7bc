"""Pause Python's cyclic garbage collector around bulk work.

Parsing a large log builds thousands of small objects (events, their sources, rows)
and next to no reference cycles; the collector would walk every live object again and
again while they are made. Pausing it for the duration costs nothing that is not
freed right after (reference counting still frees everything without cycles).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (if it was enabled)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
