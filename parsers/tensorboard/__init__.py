"""TensorBoard event files (``events.out.tfevents.*``) and log directories.

Every scalar point is read, not a sample (TensorBoard's own loader keeps 10,000 per
tag by default): ``simple_value`` points (PyTorch ``SummaryWriter``, tensorboardX, TF1)
and one-element tensors of the ``scalars`` plugin (TF2, PyTorch ``new_style``). The
reader is logbook's own (TFRecord framing, CRC-32C, a minimal protobuf decoder, all
vectorized with numpy: ``parsers.tensorboard.tfrecord``, ``parsers.tensorboard.wire``,
``parsers.tensorboard.proto``), so neither TensorFlow nor tensorboard is needed.

Tags map to canonical columns where the name leaves no doubt, evaluation tags become
``validation`` events, other tags keep their names (``parsers.tags``). A
directory is read as one run: how its event files and sub-directories are grouped into
launches is in ``parsers.tensorboard.runs``. ``line`` is the number of the event
record (1-based) in the launch's event file; every record is used, ignored (headers,
non-scalar summaries) or unrecognized (bad CRC, not an event, cut short).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from logbook.errors import UsageError
from logbook.parsed import Parsed
from parsers.tags import MAPS as _MAPS
from parsers.tensorboard.file import looks_like_events
from parsers.tensorboard.runs import event_files, launches
from parsers.tensorboard.table import to_parsed

NAME = "tensorboard"
DESCRIPTION = "TensorBoard event files or log directories (all scalars, no sampling)"
EXAMPLE = "runs/Jan01_12-00-00_host/events.out.tfevents.1704110400.host.1234.0 (binary)"
MAPS = _MAPS


SNIFF_MAX = 0  # the highest score sniff gives


def sniff(head: list[str]) -> int:
    """Event files are binary: they are recognized by path (``sniff_path``)."""
    return 0


def sniff_path(path: Path) -> int:
    """95 for an event file (by name, or by its first record), 80 for a directory with
    event files at or under it, else 0."""
    if path.is_dir():
        return 80 if _has_events(path) else 0
    if "tfevents" in path.name:
        return 95
    try:
        with open(path, "rb") as fh:
            return 90 if looks_like_events(fh.read(64)) else 0
    except OSError:
        return 0


def _has_events(path: Path) -> bool:
    return any(True for _ in _first_event(path))


def _first_event(path: Path):
    for f in event_files(path):
        yield f
        return


def read_path(path: Path, runs: bool = False) -> list[Parsed]:
    """One part per launch, in launch order; ``meta["file"]`` names its event file,
    ``meta["lines"]`` its number of records and ``meta["run_dir"]`` its writer root.
    ``runs``: directories of separate runs are welcome (see ``parsers.read_logs``)."""
    found, caveats = launches(Path(path), together=runs)
    parts = []
    for k, launch in enumerate(found):
        part = to_parsed(launch, str(launch.main.path))
        part.meta["file"] = str(launch.main.path)
        part.meta["lines"] = launch.main.records
        part.meta["run_dir"] = launch.run
        if k == 0:
            part.meta["caveats"] = caveats + part.meta["caveats"]
        parts.append(part)
    return parts


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    raise UsageError(f"{name}: TensorBoard event files are binary: give the file or its directory")
