"""Line classes of Megatron-family logs: prefixes, record starts, events, noise.

Every pattern here is written against the *body* of a line, what is left once the
launcher and rank prefixes (``[default7]:``, ``0: ``, ``slurm_procid 0 : ``, a pdsh
host name) and Megatron's ``[YYYY-mm-dd HH:MM:SS(.ffffff)]`` time stamp are taken off.
The vectorized classifier puts ``PREFIX`` in front of the anchored ones, so no copy of
the text is made for the millions of lines that are not records.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

# One launcher/rank prefix: torchrun, its rank form, Slurm, ``srun -l``, a pdsh host (a
# name with a digit, ``localhost``, an IPv4 address).
PREFIX_TOKEN = (
    r"(?:\[default\d+\]:|\[rank\d+\]:|slurm_procid\s*\d+\s*:|\d{1,5}:\s"
    r"|[A-Za-z][\w.-]*\d[\w.-]*:\s|localhost:\s|\d{1,3}(?:\.\d{1,3}){3}:\s)"
)
# Launcher/rank prefixes, any number of them, then an optional time stamp (captured;
# a README's ``[xxxx-xx-xx xx:xx:xx]`` placeholder is a stamp with no time).
PREFIX = (
    r"^\s*(?:" + PREFIX_TOKEN + r"\s*)*"
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]\s*"
    r"|\[[xX]{4}-[xX]{2}-[xX]{2}[ T][xX]{2}:[xX]{2}:[xX]{2}\]\s*)?"
)
PREFIX_RE = re.compile(PREFIX)
# A line whose text after its prefixes is indented (the source line Python quotes under
# a traceback's ``File`` line, behind the same prefixes).
INDENTED = r"^(?:\s*" + PREFIX_TOKEN + r")*\s"

# A training record: ``iteration N/ M |`` (GPT-NeoX puts ``samples/sec: X |`` first).
RECORD_START = r"(?:samples/sec:[^|]*\|\s*)?iteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*\|"

BLANK = r"\s*$"
TABLE_ROW = r"^\s*\|.*\|\s*$"  # nvidia-smi and other tables printed by the job script
ELISION = r"(?:\.{3}|\[\.\.\.\]|\(\.\.\.\)|…)\s*$"
COMMENT = r"^\s*#|^\s*(?:```|~~~)[\w+.-]*\s*$"  # (a paste's markdown fences too)
# The collector's ``# ---- (next pasted block) ----``: what follows may be another launch.
SEPARATOR = r"^\s*#\s*-{3,}"
SAVE_TIMER = r"save-checkpoint\W*:\s*\(?(?P<a>[\d.]+)(?:,\s*(?P<b>[\d.]+))?"
# the load timer of a launch that read a checkpoint (a second at least: a load path with
# no checkpoint in it takes milliseconds)
LOAD_TIMER = r"load-checkpoint\W*:\s*\(?(?:[\d.]+,\s*)?(?P<ms>\d{4,}(?:\.\d*)?)\)?\s*$"

# Noise that could otherwise look like crash evidence (argument dumps, stack frames).
STRONG_NOISE_ANCHORED = [
    r"\S+ \.{3,}",  # argument dump / per-rank timer lines: "lr ........ 0.0001"
    r"frame #\d+:",
    r'File "',
    r"Exception raised from ",
    r"The above exception was the direct cause",
    r"During handling of the above exception",
    r"time \(ms\)",
    r"\(min, max\) time across ranks",
    r"\[Rank \d+\] \(after \d+ iterations\) memory",
    r"\(?after \d+ iterations\)? memory",
]
STRONG_NOISE_ANYWHERE = [r"NCCL (?:INFO|WARN) "]

# Framework output known to carry nothing for the timeline.
NOISE_ANCHORED = [
    r"\[(?:INFO|WARNING|WARN|DEBUG)\]",
    r"(?:INFO|DEBUG|WARNING):[\w.]+:",
    r"(?:WARNING|Warning|UserWarning|FutureWarning)[: ]",
    r"\S+\.py:\d+: \w*Warning:",
    r"warnings\.warn\(",
    r"-{3,}",
    r"={3,}",
    r"\*{3,}\s*$",
    r"!{2,}",
    r"(?:>|>>>) ",
    r"\[(?:after|before) [^\]]*\] datetime:",
    r"time to initialize megatron",
    r"setting (?:global batch size|number of micro-batches|tensorboard)",
    r"using torch\.\w+ for parameters",
    r"building \S+ (?:model|tokenizer)",
    r"(?:Detected CUDA files|Emitting ninja build file|Building extension module|"
    r"Allowing ninja|ninja: |Loading extension module|make: |Using \S+ as PyTorch "
    r"extensions root|No modifications detected|Creating extension directory|Time to load )",
    r"(?:Your compiler \(|built with for this platform|use g\+\+ to to compile|compile "
    r"PyTorch from source|c\+\+ to compile your extension|See https://github\.com/pytorch/"
    r"pytorch/blob/master/CONTRIBUTING\.md|with compiling PyTorch from source)",
    r"(?:reading sizes|reading pointers|reading document index|creating numpy buffer|"
    r"creating memory view)",
    r"(?:number of documents|total number of (?:samples|epochs)):",
    r"(?:train|validation|test):\s*\d*\s*$",
    r"document indices in \[",
    r"loaded indexed file in",
    r"dataset \d+, input: [\d.]+, achieved:",
    r"Killing subprocess \d+",
    r"(?:srun|slurmstepd): ",
    r"\++ ",  # shell trace (set -x) of the job script
    r"\+[-=+]{3,}\+\s*$",  # nvidia-smi table borders
    r"\|.*(?:MiB|NVIDIA-SMI|Driver Version|Persistence-M|GPU\s+Name|Processes:).*\|\s*$",
    r"wandb: ",
    r"\[[EWIF] [\w.]+\.(?:cpp|cc|h):\d+\]",  # C++ (glog-style) messages from torch/NCCL
    r"checkpoint version ",
    r"Number of parameters in ",
    r"(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing "
    r"CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`)",
    r"theoretical memory footprints:",
    # DeepSpeed's pipeline engine's own line for a step (another loss: the step's
    # micro-batch mean); a record only at a step no framework record gives (see
    # ``records.pipe_records``)
    r"steps: \d+ loss: \S+ iter time \(s\):",
]


_CLASS_OUT = {
    "d": "[0-9]",
    "s": "[ \\t]",
    "w": "[A-Za-z0-9_]",
    "S": "[^ \\t]",
    "W": "[^A-Za-z0-9_]",
}
_CLASS_IN = {"d": "0-9", "s": " \\t", "w": "A-Za-z0-9_"}


def ascii_classes(pattern: str) -> str:
    """The pattern with ``\\d``, ``\\s``, ``\\w`` (and their negations) spelled as ASCII
    classes: the vectorized regex engine runs these about twice as fast as the Unicode
    ones, and log prefixes and numbers are ASCII."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            table = _CLASS_IN if in_class else _CLASS_OUT
            out.append(table.get(nxt, ch + nxt))
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class and out and out[-1] not in ("[", "[^"):
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


@functools.cache
def vx(pattern: str) -> str:
    """A pattern for the vectorized engine: ASCII classes, group names dropped."""
    return _UNNAMED.sub("(?:", ascii_classes(pattern))


def _any(patterns: list[str]) -> str:
    """One alternation of the patterns, their group names dropped (they repeat)."""
    return "(?:" + "|".join(_UNNAMED.sub("(?:", p) for p in patterns) + ")"


_UNNAMED = re.compile(r"\(\?P<\w+>")


def anchored(patterns: list[str]) -> str:
    """The patterns, each tried right after the line's prefixes."""
    return PREFIX + _any(patterns)


# Line classes (codes in a numpy array, one per physical line).
OTHER, RECORD, CONT, EVENT, IGNORED = 0, 1, 2, 3, 4


def classify(text: pl.Series, event_anchored: list[str], event_anywhere: list[str]) -> np.ndarray:
    """The class of every line: record, event, ignored, or other (resolved by
    :func:`resolve_other`). The other patterns only see the lines that are not
    records."""
    codes = np.zeros(text.len(), dtype=np.int8)
    # (the anchored regex gives up early on other lines: a literal pre-filter costs more)
    codes[contains(text, vx(PREFIX + RECORD_START))] = RECORD
    # the other classes in order of precedence, each tried on the lines still open
    stages = [
        (vx(SEPARATOR), EVENT),
        (vx(PREFIX + _any([BLANK, ELISION]) + "|" + COMMENT), IGNORED),
        (vx(SAVE_TIMER + "|" + LOAD_TIMER), EVENT),
        (vx(anchored(STRONG_NOISE_ANCHORED) + "|" + _any(STRONG_NOISE_ANYWHERE)), IGNORED),
        (vx(anchored(event_anchored) + "|" + _any(event_anywhere)), EVENT),
        (vx(anchored(NOISE_ANCHORED)), IGNORED),
    ]
    open_idx = np.flatnonzero(codes != RECORD)
    for pattern, code in stages:
        if not open_idx.size:
            break
        hit = contains(text.gather(open_idx), pattern)
        codes[open_idx[hit]] = code
        open_idx = open_idx[~hit]
    return codes


def _take(text: pl.Series, mask: np.ndarray) -> pl.Series:
    return text.filter(pl.Series(mask, dtype=pl.Boolean))


PARALLEL_MIN = 50_000  # lines from which a regex scan is split over threads


def contains(text: pl.Series, pattern: str, literal: bool = False) -> np.ndarray:
    """``str.contains`` as a numpy mask, on slices side by side (see :func:`mask`)."""
    return mask(text, lambda t: t.str.contains(pattern, literal=literal))


def mask(text: pl.Series, test: Callable[[pl.Series], pl.Series]) -> np.ndarray:
    """A boolean string test as a numpy mask; long series are cut into slices tested
    side by side (a string kernel releases the GIL but runs one slice per thread)."""
    n = text.len()
    workers = min(os.cpu_count() or 1, 4)
    if n < PARALLEL_MIN or workers < 2:
        return test(text).to_numpy()
    size = -(-n // workers)

    def scan(start: int) -> np.ndarray:
        return test(text.slice(start, size)).to_numpy()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return np.concatenate(list(pool.map(scan, range(0, n, size))))


def resolve_other(text: pl.Series, codes: np.ndarray) -> np.ndarray:
    """Continuations of wrapped records become CONT; source lines quoted under a
    traceback frame and table rows become IGNORED; the rest stays OTHER
    (unrecognized)."""
    codes = codes.copy()
    rec = np.flatnonzero(codes == RECORD)
    rec_text = text.gather(rec)
    closed = mask(rec_text, lambda t: t.str.ends_with("|"))
    if not closed.all():  # spaces after the last ``|``, or a record wrapped or cut
        rest = np.flatnonzero(~closed)
        closed[rest] = contains(rec_text.gather(rest), vx(r"\|\s*$"))
    # a record wrapped right after a ``|`` ends in one too: one with no loss yet, an
    # unclassified line after it, is open (a skipped step's record prints no loss, and
    # the line after it is a record or an event); only those few lines are looked at
    nxt = np.minimum(rec + 1, len(codes) - 1)
    maybe = np.flatnonzero(closed & (codes[nxt] == OTHER) & (nxt > rec))
    if maybe.size:
        closed[maybe] = contains(rec_text.gather(maybe), vx(r"(?i)loss"))
    open_rec = rec[~closed]
    other = np.flatnonzero(codes == OTHER)
    t = _take(text, codes == OTHER) if other.size else pl.Series([], dtype=pl.String)
    # a line of fields only (``loss scale: 1.0 | grad norm: nan |``) right after a record
    # or its continuation goes on with it, although the line before ends in ``|``: a
    # record hard-wrapped after every bar
    fields = t.str.contains(vx(_FIELDS_LINE)).to_numpy()
    if open_rec.size or fields.any():
        start_open = np.zeros(len(codes), dtype=bool)
        start_open[open_rec] = True
        cand = np.zeros(len(codes), dtype=bool)
        cand[other[t.str.contains("|", literal=True).to_numpy()]] = True
        ends = np.zeros(len(codes), dtype=bool)
        ends[other[t.str.contains(vx(r"\|\s*$")).to_numpy()]] = True
        more = np.zeros(len(codes), dtype=bool)
        more[other[fields]] = True
        after = np.zeros(len(codes), dtype=bool)
        after[rec] = True
        codes[_continuations(start_open, cand, ends, more, after)] = CONT
    other = np.flatnonzero(codes == OTHER)
    if other.size:
        t = pl.DataFrame({"t": _take(text, codes == OTHER)}).select(
            indented=pl.col("t").str.contains(vx(INDENTED)),
            table=pl.col("t").str.contains(vx(TABLE_ROW)),
        )
        prev = other - 1
        frames = text.gather(np.maximum(prev, 0)).str.contains(vx(PREFIX + r'File "')).to_numpy()
        code_line = frames & (prev >= 0) & t.get_column("indented").to_numpy()
        codes[other[code_line | t.get_column("table").to_numpy()]] = IGNORED
    return codes


_MAX_WRAP = 32  # physical lines one record may be wrapped over
# a line of ``key: value |`` fields and nothing else (a key starts with a letter; the
# last one, a record's end, may have no ``|`` after it)
_FIELD = r"[A-Za-z][\w .()/-]*:\s*[^|:]*?"
_FIELDS_LINE = rf"^\s*{_FIELD}(?:\s*\|\s*{_FIELD})*\s*\|?\s*$"


def _continuations(
    start_open: np.ndarray,
    cand: np.ndarray,
    ends: np.ndarray,
    more: np.ndarray,
    records: np.ndarray,
) -> np.ndarray:
    """Lines that continue an unterminated record line (a record hard-wrapped by a copy
    and paste): candidates directly after an open record, up to the one ending in ``|``;
    and lines of fields only (``more``) directly after a record (``records``) or one of
    its continuations."""
    cont = np.zeros(len(cand), dtype=bool)
    for _ in range(_MAX_WRAP):
        open_ = (start_open | cont) & ~ends
        new = np.zeros_like(cont)
        new[1:] = cand[1:] & (open_[:-1] | (more[1:] & (records | cont)[:-1]))
        if np.array_equal(new, cont):
            break
        cont = new
    return cont
