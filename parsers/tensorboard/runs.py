"""A TensorBoard log directory -> the launches of one run.

TensorBoard calls every directory that holds event files a run. logbook reads one
training run, so a directory is read as follows:

- A directory with event files, not inside another such directory, is a *writer
  root*. Its own event files are the run's launches (one file per process start, in
  the order of their first wall time): stitched, they become segments.
- A directory with event files inside a writer root is a sub-writer of that root
  (``add_scalars`` writes ``<root>/<tag>_<key>/`` or ``<root>/<tag>/<key>/``): its
  points join the root's records under the sub-directory's name (``loss_train``), in
  the launch that was running when they were written.
- Several writer roots: those named ``eval``, ``val``, ``valid``, ``validation``,
  ``test`` (Keras writes ``train/`` and ``validation/``) hold evaluations of their
  siblings; the others are launches of one run when they ran one after the other
  (Hugging Face and torchtitan start a new directory per launch), and are refused
  when they ran at the same time (separate experiments: give one of them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from logbook.errors import InputError
from parsers.tags import EVAL_WORDS
from parsers.tensorboard.file import EventFile, read_event_file

_OVERLAP_S = 1.0  # launches may overlap this much (a writer closing late)


@dataclass
class Launch:
    main: EventFile
    subs: list[tuple[EventFile, str]] = field(default_factory=list)  # (file, tag prefix)
    evals: list[tuple[EventFile, str]] = field(default_factory=list)  # (file, split)
    run: str = ""  # the writer root, relative to the path given


def is_event_file(p: Path) -> bool:
    return "tfevents" in p.name and p.is_file()


def event_files(path: Path) -> list[Path]:
    """Event files at or under ``path``, sorted by path."""
    if path.is_file():
        return [path]
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        found += [Path(dirpath) / f for f in sorted(filenames) if "tfevents" in f]
    return found


def launches(path: Path, together: bool = False) -> tuple[list[Launch], list[str]]:
    """The launches of the run under ``path`` (in launch order) and caveats. Writer
    roots that ran at the same time are refused, unless ``together`` (the caller reads
    them as separate runs: each launch names its root in ``run``)."""
    files = event_files(path)
    if not files:
        raise InputError(f"{path}: no TensorBoard event files (events.out.tfevents.*) in it")
    read = {f: read_event_file(f) for f in files}
    dirs = sorted({f.parent for f in files})
    roots = [d for d in dirs if not any(o != d and o in d.parents for o in dirs)]
    evals = [r for r in roots if r.name.lower() in EVAL_WORDS and len(roots) > 1]
    trains = [r for r in roots if r not in evals]
    if not trains:
        raise InputError(f"{path}: only evaluation event files ({_names(path, evals)})")
    caveats: list[str] = []
    by_root = {r: _own_files(r, files, read) for r in trains}
    if not together:
        _refuse_concurrent(path, by_root)
    out: list[Launch] = []
    for r in sorted(trains, key=lambda r: _start(by_root[r])):
        out += [Launch(main=ef, run=_rel(path, r)) for ef in by_root[r]]
    for f in files:
        d = f.parent
        root = next((r for r in roots if r == d or r in d.parents), None)
        if root is None or (root in trains and d == root):
            continue
        target = _launch_at(out, read[f])
        if root in evals:
            target.evals.append((read[f], root.name.lower()))
        else:
            target.subs.append((read[f], d.relative_to(root).as_posix()))
    if len(trains) > 1:
        caveats.append(
            f"{len(trains)} TensorBoard run directories read as launches of one run, in "
            f"time order: {_names(path, trains)}"
        )
    return out, caveats


def _own_files(root: Path, files: list[Path], read: dict[Path, EventFile]) -> list[EventFile]:
    own = [read[f] for f in files if f.parent == root]
    return sorted(own, key=lambda ef: (_first(ef), ef.path.name))


def _first(ef: EventFile) -> float:
    w = ef.first_wall
    return w if w is not None else float("inf")


def _start(files: list[EventFile]) -> float:
    return min((_first(f) for f in files), default=float("inf"))


def _span(files: list[EventFile]) -> tuple[float, float] | None:
    firsts = [f.first_wall for f in files if f.first_wall is not None]
    lasts = [f.last_wall for f in files if f.last_wall is not None]
    return (min(firsts), max(lasts)) if firsts and lasts else None


def _refuse_concurrent(path: Path, by_root: dict[Path, list[EventFile]]) -> None:
    spans = sorted((s, r) for r, fs in by_root.items() if (s := _span(fs)) is not None)
    end, last = float("-inf"), None
    for (a, b), r in spans:
        if last is not None and a < end - _OVERLAP_S:
            raise InputError(
                f"{path}: holds TensorBoard runs written at the same time "
                f"({_names(path, [last, r])}): give one run directory"
            )
        if b > end:
            end, last = b, r


def _launch_at(out: list[Launch], ef: EventFile) -> Launch:
    """The launch that was running when this file was begun (the last one started
    before it; the first when it has no time)."""
    w = ef.first_wall
    if w is None:
        return out[0]
    starts = np.array([_first(launch.main) for launch in out])
    k = int(np.searchsorted(starts, w + _OVERLAP_S, side="right")) - 1
    return out[max(k, 0)]


def _rel(path: Path, d: Path) -> str:
    base = path if path.is_dir() else path.parent
    rel = d.relative_to(base).as_posix() if d != base and base in d.parents else ""
    return rel or d.name


def _names(path: Path, dirs: list[Path]) -> str:
    return ", ".join(_rel(path, d) for d in dirs)
