"""Records printed as blocks of ``key: value`` lines, one key a line::

    ################################################################################
                          Learning iteration 1/10
                            Total steps: 512
                        Mean value loss: 19.6685
    --------------------------------------------------------------------------------

(rsl_rl), Coqui TTS's ``--> STEP: 49/377 -- GLOBAL_STEP: 370050`` followed by ``| >
loss_mel: 17.6 (17.2)`` lines, Ray Tune's ``Result for TRIAL:`` followed by its YAML,
DeepRM's ``Iteration: 0`` blocks.

A block starts at a header: a line that names a counter (``Learning iteration 1/10``,
``--> STEP: 49/377 -- GLOBAL_STEP: 370050``) or ``Result for ...:``; in a file without
headers, where a key of the block comes again. Its step is the header's (a global step
before the step within an epoch), else that of a step key in the block (``Iteration``,
``training_iteration``, ``global_step``). Nested keys (YAML) are joined with ``/``; a
running average in brackets after the value and a ``+- std`` are left out; values that
are no number make no column. A block cut at the start of an excerpt (its header before
the cut) takes the step before the first header's, by the headers' stride.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from logbook.parsed import Parsed
from logbook.schema import EventBase, Source, Validation
from parsers.columns import whole_counts, with_core
from parsers.kv_table import events_between
from parsers.reader import aliases
from parsers.reader.clean import ANSI
from parsers.reader.extract import COMMENT
from parsers.reader.numbers import NUMBER

NAME = "kv-blocks"
DESCRIPTION = "blocks of key: value lines, one key a line (rsl_rl, Coqui TTS, Ray Tune)"
EXAMPLE = "                        Mean value loss: 19.6685"
MAPS = (
    "each block->one record; its header's counter (a global step first) or a step key "
    "(Iteration, training_iteration, global_step)->step; loss->loss, other keys by "
    "their names (nested ones joined with /)"
)
SNIFF_MAX = 60
MIN_VALUES = 2  # numeric values a block needs to be a record
SNIFF_ONE = 40  # one headed block alone, with ONE_BLOCK_VALUES numeric keys at least
ONE_BLOCK_VALUES = 5

_RULE = re.compile(r"^\s*([-#=*_~+])\1{4,}\s*$")
_KV = re.compile(
    r"^(?P<ind>[ \t]*)(?:\|\s*>\s*)?(?P<key>[A-Za-z_][\w .()/%\[\]-]*?)"
    r"(?:[ \t]*:[ \t]*|[ \t]*\t[ \t]*)(?P<val>.*?)\s*$"
)
_VALUE = re.compile(
    rf"^(?P<v>{NUMBER})(?:\s*(?:\+-|±|\+/-)\s*{NUMBER})?(?:\s*\(\s*{NUMBER}\s*\))?"
    r"\s*(?:[a-zA-Z%]{1,8})?$"
)
_GLOBAL = re.compile(r"(?i)\bglobal[_ ]?(?:step|iter(?:ation)?)s?\b\W{0,3}(\d{1,18})\b")
_COUNTER = re.compile(
    r"(?i)\b(?:iteration|iter|step|update|epoch)s?\b\W{0,3}(\d{1,18})(?:\s*/\s*(\d{1,18}))?"
)
_NUMBERS = re.compile(r"\d+(?:\.\d+)?")
_RESULT = re.compile(r"^Result for \S.*:\s*$")
_LIST_ITEM = re.compile(r"^\s*- \S")
# a traceback's lines are no keys: ``RuntimeError: CUDA error: ...``
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_NOT_KEY = re.compile(r"(?:Error|Exception|Warning|Traceback\b.*)$|^(?:File|During) ")
_COMMENT = re.compile(COMMENT)
_ANSI = re.compile(ANSI)
# a header of evaluation results: the lines after it until the next header are no record
_EVAL_HEAD = re.compile(r"(?i)^\W*(?:eval(?:uation)?|valid(?:ation)?|test)\b[\w ]*:?\W*$")


def _aside(text: str) -> bool:
    """A blank line, a rule or a collector's comment: no part of a block."""
    return not text.strip() or bool(_RULE.match(text)) or bool(_COMMENT.match(text.strip()))


@dataclass
class _Block:
    first: int  # index of its first line
    step: int | None = None  # the header's
    headed: bool = False
    evaluation: bool = False  # under an evaluation header: no training record
    lines: list[int] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)


def _header(text: str) -> tuple[bool, int | None]:
    """Whether a line heads a block, and the step it names."""
    if _RESULT.match(text):
        return True, None
    if _KV.match(text) and not _COUNTER.search(text.split(":")[0] if ":" in text else ""):
        return False, None
    m = _GLOBAL.search(text) or _COUNTER.search(text)
    if m is None:
        return False, None
    return True, int(m.group(1))


def _blocks(texts: list[str]) -> list[_Block]:
    """The blocks of ``texts``: split at headers where the lines have two or more,
    else where a key comes again."""
    texts = [_ANSI.sub("", t) if "\x1b" in t else t for t in texts]
    heads = [(False, None) if _aside(t) else _header(t) for t in texts]
    by_header = sum(h for h, _ in heads) >= 2
    out: list[_Block] = []
    cur: _Block | None = None
    stack: list[tuple[int, str]] = []  # (indent, key) of YAML mappings open
    for k, t in enumerate(texts):
        if _aside(t):
            continue
        head, step = heads[k]
        if by_header and _EVAL_HEAD.match(t.strip()):
            cur = _Block(first=k, headed=True, evaluation=True, lines=[k])
            out.append(cur)
            stack = []
            continue
        if head and (by_header or step is not None):
            cur = _Block(first=k, step=step, headed=True, lines=[k])
            out.append(cur)
            stack = []
            continue
        if _LIST_ITEM.match(t):
            if cur is not None:
                cur.lines.append(k)
            continue
        m = _KV.match(t)
        if m is None or _NOT_KEY.search(m.group("key")):
            continue
        ind = len(m.group("ind").expandtabs(4))
        val = m.group("val")
        while stack and stack[-1][0] >= ind:
            stack.pop()
        key = "/".join([s for _, s in stack] + [m.group("key").strip()])
        if val == "" and ":" in t:
            stack.append((ind, m.group("key").strip()))
        if cur is None or (not by_header and key in cur.keys):
            cur = _Block(first=k, lines=[])
            out.append(cur)
        cur.lines.append(k)
        cur.keys.add(key)
        v = _VALUE.match(val)
        if v is not None and key not in cur.values:
            try:
                cur.values[key] = float(v.group("v").replace(",", ""))
            except ValueError:
                continue
    return out


def _records(blocks: list[_Block]) -> list[_Block]:
    """The blocks that are training records: two numeric values or more, not under an
    evaluation header; a first block without a header (an excerpt cut inside one, or a
    start-up dump of settings) only where it shares half its keys with the others."""
    out = [b for b in blocks if len(b.values) >= MIN_VALUES and not b.evaluation]
    headed = [b for b in out if b.headed]
    if out and headed and not out[0].headed:
        theirs = set().union(*(b.values for b in headed))
        if len(set(out[0].values) & theirs) < 0.5 * len(out[0].values):
            out = out[1:]
    return out


def sniff(head: list[str]) -> int:
    """60 for two blocks or more with three shared numeric keys and a step that grows,
    whose lines are most of the text; 40 for one block under a header with a step and
    five numeric keys at least, most of the text; else 0."""
    every = _blocks(head)
    blocks = _records(every)
    filled = sum(1 for t in head if not _aside(t))
    inside = sum(len(b.lines) for b in every)
    if len(blocks) == 1 and blocks[0].headed and len(blocks[0].values) >= ONE_BLOCK_VALUES:
        # one block as people paste it (rsl_rl's ``Learning iteration 8391/10000`` and its
        # keys): a record where it is most of the text
        # (a header that is a counter and no more: a record line with keys after it,
        # detectron2's ``iter: 499  total_loss: ...`` before its evaluation, is not one)
        bare = len(_NUMBERS.findall(head[blocks[0].first])) <= 3
        one = bare and blocks[0].step is not None and inside >= 0.5 * max(filled, 1)
        return SNIFF_ONE if one else 0
    if len(blocks) < 2:
        return 0
    shared = set(blocks[0].values)
    for b in blocks[1:]:
        shared &= set(b.values)
    if len(shared) < 3:
        return 0
    steps = [_step_of(b) for b in blocks]
    known = [s for s in steps if s is not None]
    alone = len(known) < 2 and not any(b.headed for b in blocks)
    if not known or alone or any(b <= a for a, b in zip(known, known[1:], strict=False)):
        return 0
    return SNIFF_MAX if inside >= 0.5 * max(filled, 1) else 0


def _step_of(b: _Block) -> int | None:
    if b.step is not None:
        return b.step
    for key, v in b.values.items():
        if aliases.canonical(key.rsplit("/", 1)[-1]) == "step" and float(v).is_integer():
            return int(v)
    return None


def _column(key: str) -> str:
    last = key.rsplit("/", 1)[-1]
    col = aliases.canonical(last) if "/" not in key else None
    col = col or aliases.column_of(key.replace("/", "_"))
    return f"{col}_field" if col in ("step", "line", "time", "segment", "source") else col


def parse(lines: pl.DataFrame, name: str) -> Parsed:
    texts = lines.get_column("text").to_list()
    numbers = lines.get_column("line").to_list()
    every = _blocks(texts)
    blocks = _records(every)
    steps = [_step_of(b) for b in blocks]
    heads = [s for b, s in zip(blocks, steps, strict=True) if b.headed and s is not None]
    if blocks and steps[0] is None and not blocks[0].headed and heads:
        # an excerpt that starts inside a block: the step before the first header's
        stride = int(np.median(np.diff(heads))) if len(heads) > 1 else 1
        steps[0] = heads[0] - max(stride, 1)
    caveats = ["key-value blocks: one record a block"]
    numbered = all(s is None for s in steps)
    if numbered and blocks:
        steps = list(range(1, len(blocks) + 1))
        caveats.append("no step in the blocks: records numbered in order (1, 2, 3, ...)")
    records, used, stepless = [], set(), []
    for b, s in zip(blocks, steps, strict=True):
        if s is None:
            stepless.append(numbers[b.first])
            used.update(b.lines)
            continue
        rec: dict = {"line": numbers[b.first], "step": s}
        for key, v in b.values.items():
            col = _column(key)
            if col == "step_field" and aliases.canonical(key.rsplit("/", 1)[-1]) == "step":
                continue  # (the block's own step)
            rec.setdefault(col, v)
        records.append(rec)
        used.update(b.lines)
    if stepless:
        caveats.append(f"{len(stepless)} block(s) without a step, unlike the others: left out")
    metrics = pl.DataFrame(records, infer_schema_length=None) if records else pl.DataFrame()
    if metrics.height:
        floats = [c for c in metrics.columns if c not in ("line", "step")]
        metrics = metrics.with_columns(pl.col("step").cast(pl.Int64)).with_columns(
            pl.col(c).cast(pl.Float64) for c in floats
        )
    found = events_between(texts, numbers, used, metrics, name)
    # (a traceback's first line continues the exception it ends with)
    used.update(k for k, t in enumerate(texts) if k not in used and _TRACEBACK.match(t))
    # blank lines and rules are put aside, and so is a dump of settings before the first
    # record; a block's other lines continue its record
    aside = {k for k, t in enumerate(texts) if _aside(t)}
    first = blocks[0].first if blocks else len(texts)
    for b in every:
        if b.evaluation and metrics.height:
            found.extend(_validation(b, texts, numbers, metrics, name))
            used.update(b.lines)
        elif b not in blocks and b.first < first and not b.headed:
            aside.update(b.lines)
    told = {e.source.line for e in found if e.source is not None}
    rec_lines = set(metrics.get_column("line").to_list()) if metrics.height else set()
    left = {numbers[k] for k in range(len(texts)) if k not in used and k not in aside}
    left = sorted((left - told - rec_lines) | set(stepless))
    ignored = len(aside)
    return Parsed(
        metrics=with_core(whole_counts(metrics)),
        events=found,
        meta={"caveats": caveats} if records else {},
        unrecognized=pl.Series("line", left, dtype=pl.Int64),
        ignored=ignored,
    )


def _validation(
    b: _Block, texts: list[str], numbers: list[int], metrics: pl.DataFrame, name: str
) -> list[EventBase]:
    """The evaluation block ``b`` as a validation at the step of the record before it."""
    if not b.values:
        return []
    before = metrics.filter(pl.col("line") < numbers[b.first]).get_column("step")
    if before.len() == 0:
        return []
    src = Source(file=name, line=numbers[b.first])
    values = {_column(k): v for k, v in b.values.items()}
    text = texts[b.first].strip()[:300]
    return [Validation(step=int(before[-1]), split="eval", values=values, source=src, text=text)]
