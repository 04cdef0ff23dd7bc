"""Run names in logbook prose and the lineage they form.

Names are dotted (``12.36``, ``12.45.2``, ``12.47.myle_rerun``) or numbered experiments
under a heading (``BNB Experiment 3`` -> ``bnb-exp-3``; a later ``Exp 01`` in that part of
the document is ``bnb-exp-1``). A series (``12.xx``) names a lineage, not one run.
A run's parent is the run it was said to continue (``requeue of 12.36``, ``Rollback to
Exp 01``, ``same as exp-2``); otherwise the run before it in the same series, in the
order the runs first appear in time (``12.45`` -> ``12.45.1`` -> ``12.45.2``).
"""

from __future__ import annotations

import re

RUN_ID = r"\d{1,3}\.(?:\d{1,3}|xx|x)(?:\.[A-Za-z0-9_]+)*"
_WORD = {"experiment": "exp", "exp": "exp", "run": "run", "round": "round", "trial": "trial"}
_HEADING_RUN = re.compile(
    rf"(?:^|[\s:])(?P<prefix>(?:[A-Za-z][\w-]*\s+){{0,2}}?)"
    rf"(?P<word>experiment|exp\.?|run|round|trial)s?[\s#-]*(?P<id>{RUN_ID}|\d+)\b",
    re.IGNORECASE,
)
_PROSE_RUN = re.compile(
    rf"\b(?:run|exp(?:eriment)?s?\.?)[\s#-]*(?P<id>{RUN_ID})(?!\w|\.\w)"
    rf"|\b(?P<word>exp(?:eriment)?\.?|run)[\s#-]*(?P<num>\d{{1,3}})\b(?![.\d])",
    re.IGNORECASE,
)
_SUBJECT = re.compile(
    rf"^(?:\[[^\]]*\]\s*)*(?:(?:run|exp(?:eriment)?)\s*#?\s*)?(?P<id>{RUN_ID})(?!\w|\.\w)"
    rf"|^(?:\[[^\]]*\]\s*)*(?P<word>run|exp(?:eriment)?)\s*#?\s*(?P<num>\d{{1,4}})\b",
    re.IGNORECASE,
)
_MENTION = re.compile(
    rf"\b(?:of|from|for|on|after|before)\s+(?:run\s+)?(?P<id>{RUN_ID})(?!\w|\.\w)", re.IGNORECASE
)
_PARENT = re.compile(
    r"\b(?:(?:requeue|restart|re-?run|relaunch|continuation|fork|copy|clone|resume)\s+(?:of|from)"
    r"|same as|roll(?:ed)?[ -]?back to|rollback to|repeat(?:s|ing)?|based on|branch(?:ed)? from"
    r"|continu\w* from|derived from|like)\s+(?P<ref>(?:run\s+)?"
    + RUN_ID
    + r"|(?:exp(?:eriment)?|run)"
    r"[\s#-]*\d{1,3}\b)",
    re.IGNORECASE,
)


def slug(words: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def heading_run(text: str) -> tuple[str | None, str | None]:
    """(run name, family prefix) from a heading: ``Experiment 12.xx Lineage`` ->
    (``12.xx``, None); ``BNB Experiment 3`` -> (``bnb-exp-3``, ``bnb``)."""
    m = _HEADING_RUN.search(text)
    if not m:
        return None, None
    if "." in m.group("id"):
        return m.group("id").lower() if m.group("id")[-1] in "xX" else m.group("id"), None
    family = slug(m.group("prefix"))
    word = _WORD[m.group("word").lower().rstrip(".")]
    name = "-".join(p for p in (family, word, str(int(m.group("id")))) if p)
    return name, family


def _numbered(word: str, num: str, family: str | None) -> str:
    word = _WORD.get(word.lower().rstrip("."), word.lower())
    return "-".join(p for p in (family, word, str(int(num))) if p)


def _ref(ref: str, family: str | None) -> str:
    m = re.match(rf"(?:run\s+)?({RUN_ID})$", ref, re.IGNORECASE)
    if m:
        return m.group(1)
    m2 = re.match(r"(exp(?:eriment)?|run)[\s#-]*(\d+)", ref, re.IGNORECASE)
    return _numbered(m2.group(1), m2.group(2), family) if m2 else ref


def subject(body: str, family: str | None = None) -> str | None:
    """The run an entry opens with (``Run 12.16 ...``, ``12.36 restart ...``)."""
    m = _SUBJECT.match(body.strip())
    if not m:
        return None
    if m.group("id"):
        return m.group("id")
    return _numbered(m.group("word"), m.group("num"), family)


def mentions(text: str, family: str | None = None, entry: bool = False) -> list[tuple[str, int]]:
    """Runs named in the text, with their offsets. In logbook entries a dotted name after
    ``of``/``from`` counts too (``Notes from 12.10``)."""
    out = []
    for m in _PROSE_RUN.finditer(text):
        name = m.group("id") or _numbered(m.group("word"), m.group("num"), family)
        out.append((name, m.start()))
    if entry:
        out += [(m.group("id"), m.start()) for m in _MENTION.finditer(text)]
    return sorted(set(out), key=lambda x: x[1])


def parent(text: str, family: str | None = None) -> tuple[str | None, tuple[int, int]]:
    """The run this text says it continues from, if any, and where it is named."""
    m = _PARENT.search(text)
    if not m:
        return None, (0, 0)
    return _ref(m.group("ref").strip(), family), m.span("ref")


def _series(name: str) -> str:
    return name.split(".")[0] if "." in name else re.sub(r"-?\d+$", "", name)


def lineage(first_seen: list[str], stated: dict[str, str]) -> dict[str, str]:
    """child -> parent. Runs listed in the order they first appear (in time when known).
    Numbered runs follow the number before them in their series (``12.45`` ->
    ``12.45.2`` -> ``12.46``); other names the run before them in their series, or
    their dotted prefix (``12.47`` -> ``12.47.myle_rerun``)."""
    out: dict[str, str] = {}
    names = [r for r in first_seen if not r.lower().endswith(("xx", ".x"))]
    numbered = sorted((_number_key(r), r) for r in names if _number_key(r) is not None)
    for (k, run), (pk, prev) in zip(numbered[1:], numbered[:-1], strict=True):
        if k[0] == pk[0]:
            out[run] = prev
    previous: dict[str, str] = {}
    for run in names:
        parts = run.split(".")
        if _number_key(run) is None:
            if len(parts) > 1:
                prefix = ".".join(parts[:-1])
                sibs = [s for s in previous.values() if s.startswith(prefix + ".")]
                out[run] = sibs[-1] if sibs and sibs[-1] != run else prefix
            elif _series(run) in previous:
                out[run] = previous[_series(run)]
        previous[_series(run) if len(parts) == 1 else ".".join(parts[:-1])] = run
    out.update({r: p for r, p in stated.items() if r != p})
    return out


def run_at(
    mentioned: list[tuple[str, int]], text: str, pos: int, default: str | None
) -> str | None:
    """The run a fact at ``pos`` is about: the nearest name in its sentence, else the
    last one before it, else ``default``."""
    bounds = [0] + [m.end() for m in re.finditer(r"[.!?](?:\s|$)|\n", text)] + [len(text)]
    lo = max(b for b in bounds if b <= pos)
    hi = min((b for b in bounds if b > pos), default=len(text))
    near = [(abs(at - pos), name) for name, at in mentioned if lo <= at < hi]
    if near:
        return min(near)[1]
    before = [name for name, at in mentioned if at <= pos]
    return before[-1] if before else default


def _number_key(name: str) -> tuple | None:
    """Dotted numbers (``12.45.2``) and numbered names (``bnb-exp-3``) in their order."""
    key = order_key(name)
    if key is not None:
        return (str(key[0]), key)
    m = re.fullmatch(r"(.*\D)(\d+)", name)
    return (m.group(1), (int(m.group(2)),)) if m and "." not in name else None


def order_key(name: str) -> tuple[int, ...] | None:
    """``12.45.2`` -> (12, 45, 2); None for names that are not all numbers."""
    parts = name.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None
