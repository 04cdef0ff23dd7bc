"""What a framework module built on the reader needs: sniffing by its own marks."""

from __future__ import annotations

import re

from parsers.reader import Spec, sniff_records


def sniff_marked(head: list[str], mark: re.Pattern[str], spec: Spec, score: int) -> int:
    """``score`` when a first line carries the framework's mark and the reader finds a
    record among them; ``score - 10`` with the mark alone (an excerpt of start-up or
    crash lines); 0 without it."""
    marked = [h for h in head if mark.search(h)]
    if not marked:
        return 0
    return score if sniff_records(head, spec) else score - 10
