"""Restarts, hardware failures and data skips in logbook prose.

Each rule returns ``Found`` items: an event kind, the offset of the words that gave it
away (for the event's source line) and the kind's fields. Learning-rate and config
changes live in ``parsers.chronicle.config``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Found:
    kind: str
    pos: int
    fields: dict[str, Any] = field(default_factory=dict)


NUM = r"\d+(?:[_,]\d{3})*(?:\.\d+)?(?:\s?[kKM](?![a-zA-Z]))?"


def step_value(text: str) -> int | None:
    """``37k`` -> 37000, ``13_251`` -> 13251, ``1.5k`` -> 1500."""
    t = text.strip().replace("_", "").replace(",", "").replace(" ", "")
    scale = {"k": 1_000, "K": 1_000, "M": 1_000_000}.get(t[-1:], 1)
    try:
        return int(round(float(t.rstrip("kKM")) * scale))
    except ValueError:
        return None


_NEGATED = re.compile(
    r"(?:\bnot?|n't|\bcannot|\bnever|\bhow to|\bunable to|\bpossible to)\s+(?:\w+\s+){0,2}$", re.I
)
# how far before a restart word a negation ("could not restart") or a generic word ("after
# every restart") is looked for: both end right before it, a few words long
_LOOK_BACK = 120
_GENERIC = re.compile(r"\b(?:each|every|any|per|all(?: the)?)\s+$", re.I)  # "after each restart"
_RESTART = re.compile(
    r"\b(?:re-?start(?:ed|ing)?|auto-?restart(?:s|ed)?|re-?queue(?:d|ing)?|re-?launch(?:ed|ing)?"
    r"|resum(?:e|ed|ing)|re-?ran|re-?run(?:ning)?|roll(?:ed|ing)?[ -]?back|rollback|launched"
    r"|kicked off|(?:start(?:ed)?|began)\s+(?:the\s+|a\s+new\s+)?(?:training|run|job))(?![\w-])"
    r"(?!\s+(?:logic|script|code|tooling|policy|mechanism|button|loop|option|flag)s?\b)",
    re.I,
)
_QUAL = r"(?:(?:the|a|our|last|latest|recent|previous|good|saved|old)\s+)*"
_CKPT = r"(?:checkpoint|ckpt|step|iteration|iter|update)s?\s+"
_RESUME = re.compile(
    r"\b(?:re-?start\w*|resum\w*|re-?queue\w*|re-?launch\w*|roll\w*[ -]?back|rollback"
    r"|re-?r[au]n\w*)"
    rf"[^.;\n]{{0,40}}?\b(?:from|to|at)\s+{_QUAL}(?:{_CKPT})?`?"
    rf"(?:global_step(?P<gs>\d+)|(?P<n>{NUM})(?!\w|\.\w))",
    re.I,
)
_RESUME_CKPT = re.compile(
    r"\b(?:switch\w*|go(?:ing)?\s+back|went\s+back|load\w*|start\w*|continu\w*|use[ds]?)"
    rf"\s+(?:from|to|at|with)?\s*{_QUAL}(?:`?global_step(?P<gs>\d+)|{_CKPT}(?P<n>{NUM})\b)",
    re.I,
)
_BEFORE_RESTART = re.compile(
    r"checkpoint\s+(?:\w+\s+){0,2}before\s+(?:the\s+)?(?:restart|switch)[^:\n]{0,60}:\s*`?"
    r"(?:global_step)?(?P<n>\d+)",
    re.I,
)
_SCRATCH = re.compile(r"\bfrom scratch\b", re.I)

HARDWARE: list[tuple[str, re.Pattern[str]]] = [
    (c, re.compile(p, re.I))
    for c, p in [
        ("ecc", r"\bECC\b|cudaErrorECC"),
        (
            "nccl",
            r"\bNCCL\b[^.\n]{0,30}?\b(?:error|timeout|timed out|issue|fail|crash|watchdog|hang)"
            r"|\b(?:error|timeout|issues?|failure)s?\s+(?:in|with|from)\s+NCCL\b",
        ),
        ("cuda_error", r"\bCUDA errors?\b|\bCUDAError\b|\bcudaError\w*"),
        ("oom", r"out of memory|\bOOM(?:ed|s)\b|\bOOM (?:error|crash|kill)"),
        ("bus_error", r"\bbus error\b|shared memory error|\bSIGBUS\b"),
        (
            "lost_gpu",
            r"\b(?:lost|missing|dead|bad|faulty|corrupt|failed|broken|slow) GPUs?\b"
            r"|\bGPUs?\s+(?:die[sd]?|dying|crash(?:ed|es)?|fell off|failed|went down"
            r"|(?:was |were )?lost)"
            r"|\bone of the GPUs\s+(?:crash\w*|die\w*|had a hardware)",
        ),
        (
            "node_failure",
            r"\b(?:bad|faulty|broken|dead|failed|unhealthy) (?:node|host|machine)s?\b"
            r"|\b(?:nodes?|hosts?|machines?)\s+(?:went|go|goes|going|came|come)\s+down"
            r"|\b(?:node|host|machine)s?\s+(?:was|were)\s+(?:faulty|down)",
        ),
        (
            "node_swap",
            r"\b(?:hot[- ]?swap\w*|swap(?:ped|ping)?(?: in| out)?|replac(?:e|ed|ing)"
            r"|reprovision\w*)\s+(?:\w+\s+){0,3}?(?:node|host|machine|gpu)s?\b"
            r"|\b(?:node|host|machine|gpu)s?\s+(?:was |were )?(?:replaced|swapped)",
        ),
        (
            "hang",
            r"\b(?:hangs?|hanging|hung|deadlock\w*)\b"
            r"|\b(?:got|gets|get|is|was|be)\s+stuck\b(?!\s+(?:at|in)\b)",
        ),
        (
            "cluster_deleted",
            r"\b(?:deleted|lost|removed|wiped)\s+(?:\w+\s+){0,3}cluster\b"
            r"|\bcluster\s+(?:was\s+|got\s+)?(?:deleted|removed|wiped)",
        ),
        ("sigterm", r"\bSIGTERM\b|\bpreempt(?:ed|ion)\b"),
        ("maintenance", r"\bmaintenance\b"),
        ("hardware", r"\bhardware\s+(?:failure|issue|error|problem|crash|fault)s?\b"),
        ("crash", r"\bcrash(?:ed|es)?\b"),
    ]
]
_UNLESS = re.compile(
    r"\b(?:no|without|not|never|against|avoid\w*|prevent\w*)\s+(?:\S+\s+){0,2}$", re.I
)
_NODE = re.compile(
    r"\b(?:node|host|machine)\s+#?\s*([\w-]*\d[\w\[\]-]*)|\b((?:node|host)[\w-]*\d[\w-]*)", re.I
)

_SKIP_RANGE = re.compile(r"--skip-train-iteration-range\s+((?:\d+\s*-\s*\d+[\s,]*)+)")
_SKIP_TILL = re.compile(
    rf"\bskip(?:ped|ping)?\s+(?:the\s+)?(?:data|batches|samples|iterations|steps)\s+"
    rf"(?:from\s+(?:step\s+|iteration\s+)?(?P<a>{NUM})\s+)?"
    rf"(?:till|until|to|through|up to)\s+(?:step\s+|iteration\s+)?(?P<b>{NUM})",
    re.I,
)
_SKIP_SPAN = re.compile(
    rf"\bskip(?:ped|ping)?\s+(?:the\s+)?(?:data|steps|iterations|batches|updates)\s+"
    rf"(?:(?:from\s+)?(?:steps?|iterations?)\s+)?(?P<a>{NUM})\s*"
    rf"(?:-|–|to|through)\s*(?P<b>{NUM})",
    re.I,
)
_SKIP_ANY = re.compile(
    r"\bskip(?:ped|ping|s)?\s+(?:\w+\s+){0,2}?(?:data|batch(?:es)?|samples)\b|\bdata\s+skipping\b",
    re.I,
)
_AT_STEP = re.compile(
    rf"\b(?:at|on)\s+(?:iteration|iter|step|update|global_step)\s*(?P<n>{NUM})",
    re.I,
)


def stated_step(text: str) -> int | None:
    """A step the text places itself at (``At iteration 21680``)."""
    m = _AT_STEP.search(text)
    return step_value(m.group("n")) if m else None


def restarts(text: str) -> list[Found]:
    """At most one restart per text, with the resume step when it is written."""
    resume, pos = None, None
    for rx in (_RESUME, _RESUME_CKPT, _BEFORE_RESTART):
        m = rx.search(text)
        if m:
            gs = m.groupdict().get("gs")
            resume, pos = step_value(gs or m.group("n")), m.start()
            break
    if resume is None:
        trig = [
            m
            for m in _RESTART.finditer(text)
            if not _NEGATED.search(before := text[max(0, m.start() - _LOOK_BACK) : m.start()])
            and not _GENERIC.search(before)
        ]
        if not trig:
            return []
        pos = trig[0].start()
        if _SCRATCH.search(text):
            resume = 0
    fields = {"resume_step": resume} if resume is not None else {}
    return [Found("restart", pos, fields)]


def hardware(text: str) -> list[Found]:
    """One hardware failure per text, its causes in the order written."""
    hits = [
        (m.start(), cause)
        for cause, rx in HARDWARE
        for m in rx.finditer(text)
        if not _UNLESS.search(text[max(0, m.start() - 30) : m.start()])
    ]
    if not hits:
        return []
    causes = [c for c, _ in HARDWARE if any(c == h for _, h in hits)]  # most specific first
    if len(causes) > 1:
        causes = [c for c in causes if c not in ("crash", "hardware")]
    if "cuda_error" in causes and ("ecc" in causes or "oom" in causes):
        causes.remove("cuda_error")  # the CUDA error that reports an ECC fault or an OOM
    fields: dict[str, Any] = {"cause": ", ".join(causes)}
    hits.sort()
    node = _NODE.search(text)
    if node:
        fields["node"] = node.group(1) or node.group(2)
    return [Found("hardware_failure", hits[0][0], fields)]


def data_skips(text: str, resume: int | None = None) -> list[Found]:
    """Skipped data ranges: ``--skip-train-iteration-range 13251-14000``, ``skip data
    till 14k`` (from the rollback step), or a skip with no range."""
    out: list[Found] = []
    for m in _SKIP_RANGE.finditer(text):
        for a, b in re.findall(r"(\d+)\s*-\s*(\d+)", m.group(1)):
            out.append(Found("data_skip", m.start(), {"start_step": int(a), "end_step": int(b)}))
    for rx in (_SKIP_TILL, _SKIP_SPAN):
        for m in rx.finditer(text):
            a = step_value(m.group("a")) if m.group("a") else None
            if a is None and resume is not None:
                a = resume + 1
            fields = {"start_step": a, "end_step": step_value(m.group("b"))}
            out.append(
                Found("data_skip", m.start(), {k: v for k, v in fields.items() if v is not None})
            )
    if not out:
        m = _SKIP_ANY.search(text)
        if m:
            out.append(Found("data_skip", m.start()))
    return out
