"""Log-format parsers: a plain-dict registry, format sniffing, and ``read_log``.

A format is one module with ``NAME``, ``DESCRIPTION``, ``EXAMPLE`` (one line of the
format), ``MAPS`` (what it maps to which column), ``sniff(head) -> int`` (0 = not this
format, up to 100 = certain, from the first lines of a file) and
``parse(lines, name) -> Parsed`` (``lines``: the frame from ``logbook.textio``).
A format whose input is a directory or a binary file also has ``sniff_path(path) ->
int`` and ``read_path(path) -> list[Parsed]`` (one part per launch, in launch order,
each with ``meta["file"]`` and ``meta["lines"]``): a path that one of them claims is
read that way. An optional ``SNIFF_MAX`` (the highest score its ``sniff`` gives) lets
sniffing skip the format once an earlier one has scored that much. Adding a format is
one module plus one line in ``_REGISTRY`` (modules are imported when first asked for).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import ModuleType

import polars as pl

from logbook.blocks import LineBlocks, streamable
from logbook.errors import InputError, UsageError
from logbook.gc_pause import paused_gc
from logbook.parsed import Parsed
from logbook.run import ParseStats, Run, RunMeta
from logbook.segments import order_parts, stitch
from logbook.textio import head_lines, local, read_lines, spool
from parsers.accounting import count_lines
from parsers.columns import python_time
from parsers.reader.copies import drop_rank_copies
from parsers.reader.fallback import crash_evidence, swallowed_exceptions, with_fallback
from parsers.reader.overflows import overflow_records

# name -> (module under ``parsers``, its SNIFF_MAX, whether it reads directories or
# binary files by ``sniff_path``/``read_path``). The two facts are kept here so that
# sniffing imports only the formats it asks (tests/test_sniff.py checks them against
# the modules).
_REGISTRY: dict[str, tuple[str, int, bool]] = {
    "logbook": ("logbook_file", 100, False),
    "megatron": ("megatron", 90, False),
    "metaseq": ("metaseq", 90, False),
    "fairseq-simple": ("fairseq_simple", 90, False),
    "jsonl": ("jsonl", 80, False),
    "chronicle": ("chronicle", 30, False),
    "hf-trainer": ("hf_trainer", 95, True),
    "tensorboard": ("tensorboard", 0, True),
    "mlflow": ("mlflow", 0, True),
    "wandb": ("wandb", 90, True),
    "nanogpt": ("nanogpt", 90, False),
    "torchtitan": ("torchtitan", 90, False),
    "lightning-csv": ("lightning_csv", 85, False),
    "nemo": ("nemo", 85, False),
    "mmengine": ("mmengine", 85, False),
    "dllogger": ("dllogger", 85, False),
    "metric-logger": ("metric_logger", 85, False),
    "olmo": ("olmo", 85, False),
    "composer": ("composer", 88, False),
    "mlx-lm": ("mlx_lm", 85, False),
    "llama2c": ("llama2c", 85, False),
    "darknet": ("darknet", 85, False),
    "modded-nanogpt": ("modded_nanogpt", 85, False),
    "nanogpt-logtxt": ("nanogpt_logtxt", 85, False),
    "megatron-golden": ("megatron_golden", 95, False),
    "sacred": ("sacred", 92, False),
    "hf-trainer-log": ("hf_trainer_log", 80, False),
    "deepspeed": ("deepspeed", 70, False),
    "hf-trainer-table": ("trainer_table", 70, False),
    "csv": ("table", 60, True),
    "lightning-bar": ("lightning_bar", 50, False),
    "kv-table": ("kv_table", 75, False),
    "kv-blocks": ("kv_blocks", 60, False),
    "yolo-results": ("yolo_results", 70, False),
    "cyclegan": ("cyclegan", 85, False),
    "epoch-table": ("epoch_table", 45, False),
    "text": ("text", 20, False),
}


class Formats(MutableMapping[str, ModuleType]):
    """The registry: format name -> its module, imported the first time it is asked
    for (a command that reads one Megatron log loads a handful of the formats)."""

    def __init__(self, registry: dict[str, tuple[str, int, bool]]) -> None:
        self._names = {k: v[0] for k, v in registry.items()}
        self._caps = {k: v[1] for k, v in registry.items()}
        self._paths = {k for k, v in registry.items() if v[2]}
        self._loaded: dict[str, ModuleType] = {}

    def __getitem__(self, name: str) -> ModuleType:
        mod = self._loaded.get(name)
        if mod is None:
            if name not in self._names:
                raise KeyError(name)
            mod = importlib.import_module(f"parsers.{self._names[name]}")
            self._loaded[name] = mod
        return mod

    def __setitem__(self, name: str, mod: ModuleType) -> None:
        self._names.setdefault(name, mod.__name__.removeprefix("parsers."))
        self._caps[name] = getattr(mod, "SNIFF_MAX", None)
        if hasattr(mod, "sniff_path"):
            self._paths.add(name)
        self._loaded[name] = mod

    def __delitem__(self, name: str) -> None:
        del self._names[name]
        self._caps.pop(name, None)
        self._paths.discard(name)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def cap(self, name: str) -> int | None:
        """The format's SNIFF_MAX, without importing it."""
        return self._caps.get(name)

    def reads_paths(self, name: str) -> bool:
        """Whether the format has ``sniff_path``, without importing it."""
        return name in self._paths


FORMATS: MutableMapping[str, ModuleType] = Formats(_REGISTRY)


def _cap(name: str) -> int | None:
    if isinstance(FORMATS, Formats):
        return FORMATS.cap(name)
    return getattr(FORMATS[name], "SNIFF_MAX", None)  # (a registry a test put in place)


def _reads_paths(name: str) -> bool:
    if isinstance(FORMATS, Formats):
        return FORMATS.reads_paths(name)
    return hasattr(FORMATS[name], "sniff_path")


# What a run's metadata keeps from its parts' meta (the first part that has it), for
# the detectors and the report: see docs/formats.md.
META_FLAGS = (
    "loss_window_averaged",
    "loss_window_steps",
    "nonfinite_filtered",
    "sampled",
    "bucketed",
    "summary",
    "trainer_state",
)

# Markdown is prose: a dated chronicle quoting log lines is still a chronicle.
PROSE_SUFFIXES = (".md", ".markdown")

SNIFF_LINES = 5000
FIRST_UNRECOGNIZED = 5


def sniff(path: str | Path) -> str:
    """The name of the format that recognizes the file's first lines best."""
    p = Path(path)
    if not local(p).exists():
        raise InputError(f"{p}: no such file")
    by_path = {n: FORMATS[n].sniff_path(local(p)) for n in FORMATS if _reads_paths(n)}
    claimed = max(by_path, key=lambda k: by_path[k]) if by_path else None
    if claimed is not None and by_path[claimed] > 0:
        return claimed
    if local(p).is_dir():
        raise InputError(
            f"{p}: is a directory without TensorBoard event files or trainer_state.json"
        )
    if p.suffix == ".parquet":
        return "logbook"
    if p.suffix.lower() in PROSE_SUFFIXES:  # markdown is prose, whatever log lines it quotes
        return "chronicle"
    head = head_lines(p, SNIFF_LINES)
    if _lfs_pointer(head):
        raise InputError(
            f"{p}: a Git LFS pointer, not the log itself (fetch the file: git lfs pull)"
        )
    best = sniff_head(head)
    if best is None:
        if not any(line.strip() for line in head):
            raise InputError(f"{p}: file is empty")
        raise InputError(
            f"{p}: unrecognized log format (give --format; `logbook formats` lists them)"
        )
    return best


_LFS_SPEC = "version https://git-lfs.github.com/spec/"


def _lfs_pointer(head: list[str]) -> bool:
    """Whether the lines are a Git LFS pointer (the file was committed to LFS and not
    fetched): ``version https://git-lfs.github.com/spec/v1``, ``oid``, ``size``."""
    body = [h for h in head if h.strip() and not h.startswith("# ")]
    return 2 <= len(body) <= 4 and body[0].startswith(_LFS_SPEC)


def sniff_head(head: list[str]) -> str | None:
    """The text format that recognizes these first lines of a log best (None: none)."""
    scores: dict[str, int] = {}
    for name in FORMATS:
        # a format that scores at most SNIFF_MAX is not asked once an earlier one has
        # scored that much (it could not win: a tie goes to the earlier format)
        cap = _cap(name)
        if cap is not None and max(scores.values(), default=0) >= cap:
            scores[name] = 0
        else:
            scores[name] = FORMATS[name].sniff(head)
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] > 0 else None


def parse_file(path: str | Path, fmt: str | None = None) -> tuple[Parsed, ParseStats]:
    """Parse one raw log file with the given or sniffed format."""
    fmt = fmt or sniff(path)
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    mod = FORMATS[fmt]
    if getattr(mod, "STREAMS", False) and streamable(path):
        # a large file, in a format read line by line: in blocks, in bounded memory
        blocks = LineBlocks(path)
        parsed = mod.parse(blocks, str(path))
        # crash evidence among the lines left, read again from the file: those lines only
        parsed = drop_rank_copies(crash_evidence(parsed, _left_lines(blocks, parsed), str(path)))
        text = blocks.stats
    else:
        lines, text = read_lines(path)
        parsed = with_fallback(mod, lines, str(path))
        parsed = drop_rank_copies(swallowed_exceptions(parsed, lines))
    parsed = overflow_records(parsed)
    parsed.metrics = _python_times(parsed.metrics)
    unrec = parsed.unrecognized
    stats = ParseStats(
        file=str(path),
        format=fmt,
        lines=text.lines,
        records=parsed.metrics.height,
        first_unrecognized=unrec.head(FIRST_UNRECOGNIZED).to_list(),
        invalid_utf8_lines=len(text.invalid_utf8_lines),
        crlf=text.crlf,
        gzip=text.gzip,
        **count_lines(parsed, text.lines),
    )
    return parsed, stats


def _left_lines(blocks: LineBlocks, parsed: Parsed) -> pl.DataFrame:
    """The lines of a file read in blocks that ``parsed`` left unrecognized."""
    left = parsed.unrecognized
    if left.len() == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})
    wanted = left.implode()
    parts = [b.filter(pl.col("line").is_in(wanted)).select("line", "text") for b in blocks]
    return pl.concat(parts) if parts else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String})


def _python_times(m: pl.DataFrame) -> pl.DataFrame:
    """The metrics with times Python cannot hold as none (see ``python_time``)."""
    if "time" not in m.columns or not m.schema["time"].is_temporal() or m.height == 0:
        return m
    return m.with_columns(python_time())


def parse_path(path: str | Path, fmt: str, runs: bool = False) -> list[tuple[Parsed, ParseStats]]:
    """Parse one path: a directory or binary file by its format's ``read_path`` (one
    part per launch), a text file by ``parse_file``. ``runs``: a directory may hold
    several runs (its format's ``read_path`` is told, where it takes ``runs``)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    mod, p = FORMATS[fmt], local(path)
    if not (hasattr(mod, "read_path") and mod.sniff_path(p) > 0):
        return [parse_file(path, fmt)]
    out = []
    takes_runs = "runs" in inspect.signature(mod.read_path).parameters
    for part in mod.read_path(p, runs=True) if runs and takes_runs else mod.read_path(p):
        part.metrics = _python_times(part.metrics)  # (a damaged stamp: no time)
        unrec = part.unrecognized
        lines = int(part.meta.get("lines", 0))
        stats = ParseStats(
            file=str(part.meta.get("file", p)),
            format=fmt,
            lines=lines,
            records=part.metrics.height,
            first_unrecognized=unrec.head(FIRST_UNRECOGNIZED).to_list(),
            **count_lines(part, lines),
        )
        out.append((part, stats))
    return out


def read_log(paths: list[str | Path] | str | Path, fmt: str | None = None, tz: str = "UTC") -> Run:
    """Read one run from its log files (one per job attempt), stitched in launch order.

    A logbook JSONL/Parquet file is read as it was written; chronicles given alone
    are read as a run of notes (``tz``: the zone of times written without one).
    """
    with paused_gc():
        return _read_log(paths, fmt, tz)


def _read_log(paths: list[str | Path] | str | Path, fmt: str | None, tz: str) -> Run:
    if isinstance(paths, str | Path):
        paths = [paths]
    paths = [spool(p) for p in paths]  # a stream (``-``, a pipe) is read once
    if not paths:
        raise UsageError("no log file given")
    formats = [fmt or sniff(p) for p in paths]
    if "logbook" in formats:
        if len(paths) > 1:
            raise UsageError("a logbook file is a whole run: give it alone, not with other logs")
        return Run.read(paths[0])
    if set(formats) == {"chronicle"}:
        from parsers.chronicle.notes import read_notes

        return read_notes(list(paths), tz)
    results = [r for p, f in zip(paths, formats, strict=True) for r in parse_path(p, f)]
    results = [(_one_run(part, st.file), st) for part, st in results]
    order = order_parts([r[0] for r in results])
    ranked = sorted(range(len(results)), key=lambda i: order.index(results[i][0]))
    parts = [results[i][0] for i in ranked]
    stats = [results[i][1] for i in ranked]
    files = [s.file for s in stats]
    metrics, events = stitch(parts, files)
    return Run(metrics=metrics, events=events, meta=run_meta(parts, stats))


def read_logs(
    paths: list[str | Path] | str | Path, fmt: str | None = None, tz: str = "UTC"
) -> list[Run]:
    """Every run in the input, in order: like :func:`read_log`, except that a file that
    holds several runs (another run appended, a second paste) gives one run each, named
    ``<name>#2``, ``#3``, ... (see :mod:`parsers.runs`). The files of one run's launches
    stay one run."""
    with paused_gc():
        return _read_logs(paths, fmt, tz)


def _read_logs(paths: list[str | Path] | str | Path, fmt: str | None, tz: str) -> list[Run]:
    if isinstance(paths, str | Path):
        paths = [paths]
    paths = [spool(p) for p in paths]  # a stream (``-``, a pipe) is read once
    if not paths:
        raise UsageError("no log file given")
    formats = [fmt or sniff(p) for p in paths]
    if "logbook" in formats or set(formats) == {"chronicle"}:
        return [_read_log(paths, fmt, tz)]
    results = [r for p, f in zip(paths, formats, strict=True) for r in parse_path(p, f, True)]
    return assemble_runs(results)


def file_parts(path: str | Path, fmt: str | None = None) -> list[tuple[Parsed, ParseStats]] | None:
    """What one file of an input gives to :func:`assemble_runs` (its parts, as
    :func:`read_logs` reads them), so that the files of a large input can be parsed
    apart (in other processes) and assembled after; None for a file that is a whole
    run in itself or a chronicle (logbook, notes), which only ``read_logs`` reads."""
    with paused_gc():
        p = spool(path)
        f = fmt or sniff(p)
        if f in ("logbook", "chronicle"):
            return None
        return parse_path(p, f, True)


def assemble_runs(results: list[tuple[Parsed, ParseStats]]) -> list[Run]:
    """The runs of an input's parsed parts (every file's, in the input's file order):
    parts split by run, ordered by launch, stitched; as :func:`read_logs` gives them."""
    from parsers.runs import by_run_column, fresh_start, run_starts, split_part

    results = [b for part, st in results for b in by_run_column(part, st)]
    groups: list[list[tuple[Parsed, ParseStats]]] = []
    for per_dir in _by_run_dir(results):
        order = order_parts([r[0] for r in per_dir])
        ranked = sorted(range(len(per_dir)), key=lambda i: order.index(per_dir[i][0]))
        groups.append([])
        for i in ranked:
            part, st = per_dir[i]
            starts = run_starts(part)
            blocks = split_part(part, st, starts) if starts else [(part, st)]
            named = groups[-1] and part.meta.get("run") != groups[-1][-1][0].meta.get("run")
            if named:
                groups.append([])  # records of another named run of the same export
            elif groups[-1] and fresh_start(groups[-1], part):
                groups.append([])  # a directory's next writer started another run
            groups[-1].append(blocks[0])
            groups += [[b] for b in blocks[1:]]
    runs = []
    for k, group in enumerate(groups):
        parts = [g[0] for g in group]
        stats = [g[1] for g in group]
        metrics, events = stitch(parts, [s.file for s in stats])
        run = Run(metrics=metrics, events=events, meta=run_meta(parts, stats))
        if len(groups) > 1:
            base = run.meta.name or parts[0].meta.get("run_dir") or Path(stats[0].file).name
            taken = {r.meta.name for r in runs}
            run.meta.name = base if base not in taken else f"{base}#{k + 1}"
            run.meta.caveats.append(f"run {k + 1} of {len(groups)} in this input")
        runs.append(run)
    return runs


def _one_run(part: Parsed, name: str) -> Parsed:
    """``part`` as one run's records; an export of several runs is refused here (read
    it with ``read_logs``, or pick one with ``--run``)."""
    from parsers.runs import several_runs

    if names := several_runs(part):
        raise InputError(
            f"{name}: holds {len(names)} runs ({', '.join(names)}): read them with "
            "read_logs, or give --run NAME"
        )
    if "_run" in part.metrics.columns:
        part.metrics = part.metrics.drop("_run")
    return part


def _by_run_dir(
    results: list[tuple[Parsed, ParseStats]],
) -> list[list[tuple[Parsed, ParseStats]]]:
    """Parts grouped by the directory of runs they came from where their writers ran at
    the same time (a sweep's TensorBoard runs); all in one group otherwise."""
    dirs = [r[0].meta.get("run_dir") for r in results]
    if len(set(dirs)) < 2 or None in dirs or not _overlap(results, dirs):
        return [results]
    return [[r for r, d in zip(results, dirs, strict=True) if d == k] for k in dict.fromkeys(dirs)]


def _overlap(results: list[tuple[Parsed, ParseStats]], dirs: list) -> bool:
    """Whether the directories' records interleave in time."""
    spans = {}
    for (part, _), d in zip(results, dirs, strict=True):
        t = part.metrics.get_column("time").drop_nulls() if "time" in part.metrics.columns else None
        if t is None or t.len() == 0:
            return False
        lo, hi = spans.get(d, (t.min(), t.max()))
        spans[d] = (min(lo, t.min()), max(hi, t.max()))
    ordered = sorted(spans.values())
    return any(b[0] < a[1] for a, b in zip(ordered, ordered[1:], strict=False))


def _arguments(extra: dict, meta: dict, last: dict) -> None:
    """The start-up arguments of the first part that prints them, and each value that a
    later dump (in a part, or a later part's own) gives otherwise than the dump before
    (a relaunch with a new LR); ``last``: the values of the latest dump so far."""
    args = meta.get("arguments")
    if not args:
        return
    changes = extra.setdefault("argument_changes", [])
    if "arguments" not in extra:
        extra["arguments"] = dict(args)
    else:
        for key, value in args.items():
            if key in last and last[key] != value:
                changes.append({"line": None, "key": key, "old": last[key], "new": value})
    last.update(args)
    for c in meta.get("argument_changes", []):
        changes.append(c)
        last[c["key"]] = c["new"]
    if not changes:
        del extra["argument_changes"]


def run_meta(parts: list[Parsed], stats: list[ParseStats]) -> RunMeta:
    """The run header of stitched parts: formats, sources, units, caveats, flags."""
    formats = list(dict.fromkeys(s.format for s in stats))
    units: dict[str, str] = {}
    caveats: list[str] = []
    name = None
    train_iters = None
    extra: dict = {}
    last_args: dict = {}
    for p in parts:
        units.update(p.meta.get("units", {}))
        caveats += [c for c in p.meta.get("caveats", []) if c not in caveats]
        name = name or p.meta.get("run")
        train_iters = p.meta.get("train_iters", train_iters)
        for k in META_FLAGS:
            if p.meta.get(k) is not None:
                extra.setdefault(k, p.meta[k])
        _arguments(extra, p.meta, last_args)
    if train_iters is not None:
        extra["train_iters"] = train_iters
    return RunMeta(
        name=name,
        format=formats[0] if len(formats) == 1 else "+".join(formats),
        sources=[s.file for s in stats],
        units=units,
        caveats=caveats,
        parse=stats,
        **extra,
    )
