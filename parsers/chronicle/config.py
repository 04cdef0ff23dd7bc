"""Learning-rate and configuration changes in logbook prose, commands and entries.

Three ways a change is written:

- a substitution on a launch script (``perl -pi -e 's|--lr 6e-5|--lr 1e-4|'``,
  ``s|ZERO_STAGE=1|ZERO_STAGE=0|``): old and new value of each flag, and flags added;
- prose around a setting's name: a change verb (``lowered``, ``switched``, ``upgraded``)
  and values (``from 2.5 to 1.5``, ``to 2.6 (from 2.4)``, ``2.5 -> 1.5``, ``by 10%``,
  ``first to 1.5, and then to 1.0``);
- a logbook entry, where a setting written with a value is what the run was given
  (``12.40 lr 6e-5, clip 1.0``, ``SGD mimicking``).
"""

from __future__ import annotations

import re
from typing import Any

from parsers.chronicle.extract import Found

VAL = r"[-+]?(?:\d+(?:[_,]\d{3})*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s?[kKM](?![a-zA-Z]))?"
_VERSION = r"v?\d+(?:\.\d+)+[\w.+-]*|v?\d+\b"
_VERB = (
    r"\b(?:lower|reduc|decreas|cut|drop|halv|rais|increas|bump|chang|adjust|set|tweak|"
    r"switch|mov|upgrad|updat|downgrad|revert|restor|replac|hot[- ]?swap|swapp|tr(?:y|ied)|"
    r"went back|go back|enabl|disabl|turn|add|remov|us(?:e|ed|ing) (?:a |the )?new)\w*"
)
_VERB_BEFORE = re.compile(_VERB + r"(?:\s+\S+){0,4}\s*$", re.I)
_VERB_AFTER = re.compile(
    r"^\W{0,3}(?:(?:was|is|has been|were|got)\s+)?(?:lowered|reduced|decreased|dropped|raised|"
    r"increased|bumped|halved|doubled|changed|set|cut|adjusted|switched|upgraded)\b",
    re.I,
)
_SWITCH = re.compile(
    r"\b(?:switch|mov|hot[- ]?swap|swapp|replac|tr(?:y|ied)|revert|went back|go back|go with|"
    r"us(?:e|ed|ing)|chang)\w*(?:\s+\S+){0,4}\s*$",
    re.I,
)
_ADJ_BEFORE = re.compile(r"\b(?:lower|higher|reduced|smaller|larger|bigger|new)\s*$", re.I)
_CUT = re.compile(r"[;\n]|\.(?:\s|$)|,\s+(?:but|while|which|so|because)\b|,\s+and\s+(?!then\b)")

_LR = re.compile(
    r"(?<![\w-])(?:lr|learning[ -]rate)(?![\w-])(?!\s*(?:warm-?up|decay|schedul|of\b))", re.I
)
KEYS: list[tuple[str, str]] = [
    ("clip_grad", r"(?:grad(?:ient)?[ -]?)?clip(?:ping)?(?:[ -]grad(?:ient)?s?)?(?:[ -]norm)?"),
    ("weight_decay", r"weight[ -_]?decay"),
    ("beta1", r"(?:adam[ -_]?)?beta[ _]?1|β1"),
    ("beta2", r"(?:adam[ -_]?)?beta[ _]?2|β2"),
    ("adam_eps", r"(?:adam[ -_]?)?eps(?:ilon)?"),
    ("seed", r"(?:random[ -])?seed"),
    ("dropout", r"dropout"),
    ("warmup", r"(?:lr[ -])?warm[ -]?up"),
    ("micro_batch_size", r"micro[ -]?batch(?:[ -]size)?|MBS"),
    ("batch_size", r"(?:global[ -])?batch[ -]size|GBS|bsz"),
    ("eval_interval", r"eval(?:uation)?(?:[ -]interval)?|validation(?: frequency)?"),
    ("save_interval", r"save[ -_]interval|checkpoint(?:ing)? (?:interval|frequency)"),
]
_KEY_RX = [(k, re.compile(rf"(?<![\w-])(?:{p})(?![\w-])", re.I)) for k, p in KEYS]
NAMED: dict[str, str] = {
    "activation": r"(?:gelu(?:_fast|_new)?|relu|swiglu|geglu|silu|swish)",
    "optimizer": r"(?:adamw|adam|sgd|adafactor|lamb|lion)"
    r"(?!\s+(?:eps|epsilon|beta|optim|state|param))",
    "precision": r"(?:fp16|bf16|fp32|fp8|tf32)",
}
_NAMED_RX = {k: re.compile(rf"(?<![\w/@-]){p}(?![\w/-])", re.I) for k, p in NAMED.items()}
_PKG = re.compile(
    r"(?<![\w-])(megatron|deepspeed|pytorch|torch|pt|cuda|nccl|apex|transformers|metaseq|"
    r"fairseq|triton|flash[- ]?attn\w*)(?:[\w-]*)\b(?:@(\S+))?",
    re.I,
)
_PKG_NAME = {"torch": "pytorch", "pt": "pytorch"}
_SUBST = re.compile(r"\bs([|/#!,])(?P<a>.+?)\1(?P<b>.*?)\1")
_FLAG = re.compile(r"--(?P<k>[a-z][\w-]*)(?:[ =]+(?P<v>[^\s\\|`'\"]+))?")
_CAPS = re.compile(r"(?<![\w-])(?P<k>[A-Z][A-Z0-9_]{1,})=(?P<v>[\w.+-]+)")
_RESET_OPT = re.compile(
    r"\breset(?:ting)?\s+(?:the\s+)?optim\w*|\boptim\w*\s+(?:state\s+)?reset\b", re.I
)


def number(text: str) -> float | str:
    """A written value as a float when it is a number (``13_251``, ``6e-5``, ``1k``)."""
    t = text.strip("`'\" ").replace("_", "").replace(",", "")
    scale = {"k": 1e3, "K": 1e3, "M": 1e6}.get(t[-1:], 1)
    try:
        return float(t.rstrip("kKM ")) * scale
    except ValueError:
        return text.strip("`'\" ").lower()


def _window(text: str, start: int, stop: int) -> str:
    end = min(stop, start + 80)
    cut = _CUT.search(text, start, end)
    return text[start : cut.start() if cut else end].replace("`", "")


def _values(after: str, value: str = VAL) -> list[tuple[Any, Any]]:
    """(old, new) pairs written after a setting's name."""
    v = f"(?:{value})"
    for rx in (
        rf"from\s+(?P<old>{v})\s+to\s+(?P<new>{v})",
        rf"to\s+(?P<new>{v})\s*,?\s*\(?from\s+(?P<old>{v})",
        rf"^\W*(?:(?:of|=|:)\s*)?(?P<old>{v})\s*(?:->|→|=>|to)\s*(?P<new>{v})",
    ):
        m = re.search(rx, after, re.I)
        if m:
            return [(number(m.group("old")), number(m.group("new")))]
    chain = [number(x) for x in re.findall(rf"\b(?:to|at)\s+({v})(?![\w/])", after, re.I)]
    return [(None if i == 0 else chain[i - 1], n) for i, n in enumerate(chain)]


def _direct(after: str) -> Any:
    m = re.match(rf"^\s*(?:=|:)?\s*({VAL})(?![\w/])", after)
    return number(m.group(1)) if m else None


def substitutions(text: str) -> list[Found]:
    """Changes made by ``s|old|new|`` edits of a launch script."""
    out: list[Found] = []
    for m in _SUBST.finditer(text):
        a, b = m.group("a"), m.group("b")
        old = {f.group("k"): f.group("v") for f in _FLAG.finditer(a)}
        old |= {c.group("k"): c.group("v") for c in _CAPS.finditer(a)}
        new = [(f.group("k"), f.group("v")) for f in _FLAG.finditer(b)]
        new += [(c.group("k"), c.group("v")) for c in _CAPS.finditer(b)]
        for key, val in new:
            if key in old and old[key] == val:
                continue
            prev = number(old[key]) if old.get(key) else None
            out.append(_change(key, prev, number(val) if val else "on", m.start()))
    return out


def _change(key: str, old: Any, new: Any, pos: int) -> Found:
    name = next((k for k, rx in _KEY_RX if rx.fullmatch(key)), key.lower().replace("-", "_"))
    if name == "lr":
        return Found("lr_change", pos, _lr_fields(old, new))
    return Found("config_change", pos, {"key": name, "old": old, "new": new})


def _lr_fields(old: Any, new: Any) -> dict[str, Any]:
    fields = {"old": old, "new": new, "manual": True}
    return {k: v for k, v in fields.items() if isinstance(v, float | bool)}


def _mentions(text: str) -> list[int]:
    """Where any setting is named, to end the value window of the one before."""
    rxs = [rx for _, rx in _KEY_RX] + [_LR, *_NAMED_RX.values()]
    return sorted(m.start() for rx in rxs for m in rx.finditer(text))


def lr_changes(text: str, entry: bool) -> list[Found]:
    out: list[Found] = []
    starts = _mentions(text)
    for m in _LR.finditer(text):
        before = text[max(0, m.start() - 40) : m.start()]
        stop = next((s for s in starts if s >= m.end()), len(text))
        after = _window(text, m.end(), stop)
        pairs = _values(after)
        verb = _VERB_BEFORE.search(before) or _VERB_AFTER.search(after)
        direct = _direct(after)
        adj = entry and _ADJ_BEFORE.search(before)
        factor = _factor(before, after)
        if not (verb or adj or factor or direct is not None or (entry and pairs)):
            continue
        if direct is not None and not pairs:
            pairs = [(None, direct)]
        old, new = pairs[-1] if pairs else (None, None)
        fields = _lr_fields(old, new)
        if factor and not ("old" in fields and "new" in fields):  # (else new/old says it)
            fields["factor"] = factor
        out.append(Found("lr_change", m.start(), fields))
    return out


_DOWN = re.compile(r"\b(?:lower|reduc|decreas|cut|drop|shr[iu]nk)\w*", re.I)
_UP = re.compile(r"\b(?:rais|increas|bump|boost)\w*", re.I)
_FRACTIONS = {"half": 1 / 2, "a half": 1 / 2, "a third": 1 / 3, "a quarter": 1 / 4}


def _factor(before: str, after: str) -> float | None:
    """new / old when the text gives only the ratio of a learning-rate change:
    ``lowered ... by 10%`` (0.9), ``raised by 20%`` (1.2), ``cut by 2x`` / ``by a factor of
    2`` (0.5), ``to 2/3 (of ...)`` (0.667), ``to half``, ``halved`` (0.5), ``doubled`` (2)."""
    near = before[-30:] + " " + after[:40]
    down, up = _DOWN.search(near), _UP.search(near)
    m = re.search(r"\bby\s+(\d+(?:\.\d+)?)\s*%", after)
    if m and (down or up) and not (down and up):
        pct = float(m.group(1)) / 100
        return round(1 - pct, 6) if down else round(1 + pct, 6)
    m = re.search(r"\bby\s+(?:a\s+factor\s+of\s+)?(\d+(?:\.\d+)?)\s*(?:x|×|times)?\b", after)
    if m and re.search(r"factor|x|×|times", m.group(0)) and (down or up) and not (down and up):
        k = float(m.group(1))
        return (round(1 / k, 6) if down else k) if k > 0 else None
    m = re.search(r"\bto\s+(\d+)\s*/\s*(\d+)\b", after)
    if m and int(m.group(2)) > 0:
        return round(int(m.group(1)) / int(m.group(2)), 6)
    m = re.search(r"\bto\s+(a half|half|a third|a quarter)\b", after, re.I)
    if m:
        return round(_FRACTIONS[m.group(1).lower()], 6)
    if re.search(r"\bhalv(?:e|ed|es|ing)\b", near, re.I):
        return 0.5
    if re.search(r"\bdoubl(?:e|ed|es|ing)\b", near, re.I):
        return 2.0
    return None


def config_changes(text: str, entry: bool) -> list[Found]:
    out = substitutions(text)
    spans = [(m.start(), m.end(), k) for k, rx in _KEY_RX for m in rx.finditer(text)]
    spans += [(m.start(), m.end(), "lr") for m in _LR.finditer(text)]
    spans.sort()
    for i, (start, end, key) in enumerate(spans):
        if key == "lr":
            continue
        stop = spans[i + 1][0] if i + 1 < len(spans) else len(text)
        after = _window(text, end, stop)
        before = text[max(0, start - 40) : start]
        verb = _VERB_BEFORE.search(before) or _VERB_AFTER.search(after)
        pairs = _values(after)
        if entry and not pairs and _direct(after) is not None:
            pairs = [(None, _direct(after))]
        if key == "seed" and verb and not pairs:
            pairs = [(None, None)]
        if pairs and (verb or entry or "->" in after or "from" in after):
            out += [_change(key, o, n, start) for o, n in pairs]
    out += _caps_changes(text) + _named_changes(text, entry) + _software(text) + _nodes(text)
    m = _RESET_OPT.search(text)
    if m:
        out.append(Found("config_change", m.start(), {"key": "optimizer_state", "new": "reset"}))
    return out


def _caps_changes(text: str) -> list[Found]:
    """``from MBS=1 to MBS=2``, ``switched to SAVE_INTERVAL=100``."""
    out = []
    for m in re.finditer(r"from\s+`?([A-Z][A-Z0-9_]+)=(\S+?)`?\s+to\s+`?\1=([\w.]+)", text):
        out.append(_change(m.group(1), number(m.group(2)), number(m.group(3)), m.start()))
    for m in _CAPS.finditer(text):
        before = text[max(0, m.start() - 30) : m.start()].replace("`", "")
        if re.search(_VERB + r"\s+to\s*$", before, re.I) and not any(
            f.pos <= m.start() < f.pos + 60 for f in out
        ):
            out.append(_change(m.group("k"), None, number(m.group("v")), m.start()))
    return out


def _named_changes(text: str, entry: bool) -> list[Found]:
    """Optimizer, activation and precision switches: values are names."""
    out = []
    for key, rx in _NAMED_RX.items():
        names = list(rx.finditer(text))
        if not names:
            continue
        v = NAMED[key]
        m = re.search(rf"(?:from\s+)?({v})\s*(?:->|→|=>|\bto\b)\s*({v})(?![\w])", text, re.I)
        if m:
            out.append(
                Found(
                    "config_change",
                    m.start(),
                    {"key": key, "old": m.group(1).lower(), "new": m.group(2).lower()},
                )
            )
            continue
        for n in names:
            before = text[max(0, n.start() - 50) : n.start()]
            if entry or _SWITCH.search(before):
                out.append(
                    Found("config_change", n.start(), {"key": key, "new": n.group(0).lower()})
                )
                break
    return out


def _software(text: str) -> list[Found]:
    out = []
    for m in _PKG.finditer(text):
        before = text[max(0, m.start() - 40) : m.start()]
        after = _window(text, m.end(), len(text))
        key = _PKG_NAME.get(m.group(1).lower(), m.group(1).lower().replace(" ", "_")) + "_version"
        pairs = _values(after, _VERSION)
        verb = re.search(
            r"\b(?:upgrad|updat|downgrad|bump|switch|mov|install|revert)\w*", before + after, re.I
        )
        if m.group(2) and verb:
            out.append(Found("config_change", m.start(), {"key": key, "new": m.group(2)}))
        elif pairs and (verb or "->" in after):
            out += [
                Found("config_change", m.start(), {"key": key, "old": _ver(o), "new": _ver(n)})
                for o, n in pairs
            ]
    return out


def _ver(v: Any) -> Any:
    return None if v is None else (f"{v:g}" if isinstance(v, float) else str(v))


def _nodes(text: str) -> list[Found]:
    rx = r"(?:from\s+(\d+)\s+(?:nodes\s+)?)?to\s+(\d+)\s+nodes\b"
    out = []
    for m in re.finditer(rx, text, re.I):
        before = text[max(0, m.start() - 50) : m.start()]
        if re.search(
            r"\b(?:switch|mov|scal|grew|expand|shr[ai]nk|reduc|increas|went|go)\w*", before, re.I
        ):
            old = float(m.group(1)) if m.group(1) else None
            out.append(
                Found(
                    "config_change",
                    m.start(),
                    {"key": "nodes", "old": old, "new": float(m.group(2))},
                )
            )
    return out
