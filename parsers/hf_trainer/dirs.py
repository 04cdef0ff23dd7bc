"""A Hugging Face output directory: every ``trainer_state.json`` in it, as one run.

Each checkpoint's ``log_history`` holds the whole history up to that checkpoint, so the
last file written holds the run that survived: the top-level ``trainer_state.json``
(``save_state()`` at the end of ``train()``) when there is one, else the most recently
modified checkpoint's (then the highest ``global_step``). A checkpoint whose history
*diverges* from it (whatever its step) was written by a launch that was later rewound:
its rows after the divergence are what that launch logged before the restart. They
are kept, placed just before the row where the surviving history diverges (all on the
line before, as ``line`` must keep the timeline's order), with a ``restart`` marker
between: the stitcher makes a new segment there, as for a log whose
step goes back. (Rows the rewound launch logged after its last checkpoint were never
saved anywhere and cannot be recovered.)
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from logbook.errors import InputError
from logbook.parsed import Parsed
from logbook.schema import Restart, Source
from logbook.textio import read_lines
from parsers.hf_trainer import state as hs

STATE = "trainer_state.json"


def state_files(path: Path) -> list[Path]:
    """``trainer_state.json`` of the directory and of its ``checkpoint-*`` directories."""
    found = [path / STATE] if (path / STATE).is_file() else []
    found += sorted(p for p in path.glob(f"checkpoint-*/{STATE}") if p.is_file())
    return found


def _key(s: hs.State, top: Path) -> tuple[int, float, int, str]:
    """Survivor last: the top-level file, else the latest written, else the furthest."""
    p = Path(s.name)
    return (1 if p.parent == top else 0, p.stat().st_mtime, s.global_step, s.name)


def read_dir(path: Path) -> list[Parsed]:
    from parsers.hf_trainer import from_state

    files = state_files(path)
    if not files:
        raise InputError(f"{path}: no trainer_state.json in it or in checkpoint-*/")
    states = sorted((hs.load(read_lines(f)[0], str(f)) for f in files), key=lambda s: _key(s, path))
    main = states[-1]
    part = from_state(main)
    caveats = list(part.meta["caveats"])
    rewound = _rewound(main, states[:-1])
    if rewound:
        part = _with_rewound(part, main, rewound)
    older = len(states) - 1
    if older:
        caveats.append(
            f"{older} older trainer_state.json file(s) compared with {Path(main.name).parent.name}/"
            f"{STATE}: {len(rewound)} rewound launch(es) found"
        )
    if any(path.glob("runs/*/*tfevents*")) or any(path.glob("runs/*tfevents*")):
        caveats.append(
            f"{path}/runs holds TensorBoard event files too (read them with --format tensorboard)"
        )
    part.meta["caveats"] = caveats
    return [part]


def _common(a: list[dict], b: list[dict]) -> int:
    """Length of the common prefix of two histories."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _rewound(main: hs.State, older: list[hs.State]) -> dict[int, hs.State]:
    """Older states that diverge from the main history, by divergence row (the longest
    one where several diverge at the same row)."""
    out: dict[int, hs.State] = {}
    for s in older:
        p = _common(main.rows, s.rows)
        if p == len(s.rows):
            continue  # a prefix of the surviving history
        if p not in out or len(s.rows) > len(out[p].rows):
            out[p] = s
    return out


def _with_rewound(part: Parsed, main: hs.State, rewound: dict[int, hs.State]) -> Parsed:
    from parsers.hf_trainer import from_state

    frames = [part.metrics]
    events = list(part.events)
    for p, s in sorted(rewound.items()):
        # between the last common row and the next one: the rewound rows, then the marker
        mark = (main.lines[p] - 1) if p < len(main.lines) else main.line_count + 1
        at = mark - 1
        first = s.lines[p] if p < len(s.lines) else 0
        old = from_state(s)
        keep = old.metrics.filter(pl.col("line") >= first)
        frames.append(keep.with_columns(pl.lit(at, dtype=pl.Int64).alias("line")))
        for e in old.events:
            if e.source and e.source.line is not None and e.source.line >= first:
                events.append(e.model_copy(update={"source": Source(file=main.name, line=at)}))
        last = main.rows[p - 1].get("step") if p else None
        events.append(
            Restart(
                resume_step=int(last) if isinstance(last, int | float) else None,
                source=Source(file=main.name, line=mark),
                text=(
                    f"{s.name}: a launch that reached step {s.global_step} logged another "
                    f"history after step {last}; the surviving history resumes from there"
                ),
            )
        )
    metrics = pl.concat(frames, how="diagonal_relaxed").sort("line", maintain_order=True)
    return Parsed(
        metrics=metrics,
        events=events,
        meta=part.meta,
        unrecognized=part.unrecognized,
        ignored=part.ignored,
    )
