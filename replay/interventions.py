"""Interventions: what a counterfactual changes, and from which step.

A variant is written ``NAME=SPEC`` where SPEC is a comma-separated list of items:

    baseline            no change (also: none)
    lr_scale:F[@S]      multiply the LR by F from step S on
    skip:A-B            skip the batches of steps A..B (no update; the step counter moves on)
    skip:+N             skip the next N batches after the start step
    clip:C[@S]          clip the global gradient norm at C from step S (0: no clipping)
    reset_opt[@S]       drop the optimizer state (Adam moments) before step S
    z_loss:C[@S]        add C * mean(log Z ** 2) to the objective from step S
    beta2:B[@S]         Adam's second-moment decay B (0 < B < 1) from step S
    eps:E[@S]           Adam's epsilon E (> 0) from step S
    data_seed:N[@S]     draw batches of data-order seed N from step S (changes the data order)
    qk_norm             LayerNorm on queries and keys: an architecture variant, so the
                        variant trains from step 0 with a fresh model

``@S`` defaults to the first step after the counterfactual's starting checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from logbook.errors import UsageError

KINDS = (
    "lr_scale", "skip", "clip", "reset_opt", "z_loss", "data_seed", "qk_norm", "bf16",
    "beta2", "eps",
)  # fmt: skip
_NEEDS_VALUE = {"lr_scale", "skip", "clip", "z_loss", "data_seed", "beta2", "eps"}
_ITEM = re.compile(r"^(?P<kind>[a-z_0-9]+)(?::(?P<value>[^@]+))?(?:@(?P<at>\d+))?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass(frozen=True, kw_only=True)
class Intervention:
    """One change. ``start`` None means "from the counterfactual's first step"; for
    ``skip``, ``start``..``end`` is the skipped range and ``count`` a relative length."""

    kind: str
    value: float | None = None
    start: int | None = None
    end: int | None = None
    count: int | None = None
    segment: int | None = None  # only from this launch (segment) on; None: in every launch

    def active(self, step: int, segment: int) -> bool:
        """Whether this change is in force at ``step`` of launch ``segment``."""
        if self.segment is not None and segment < self.segment:
            return False
        return self.start is not None and self.start <= step

    def resolved(self, first_step: int) -> Intervention:
        """This change with its steps made absolute for a run that starts at ``first_step``."""
        if self.kind == "skip" and self.count is not None:
            return replace(self, start=first_step, end=first_step + self.count - 1, count=None)
        if self.start is None and self.kind != "qk_norm":
            return replace(self, start=first_step)
        return self

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Plan:
    """The interventions of one run, queried per step by the engine."""

    items: list[Intervention] = field(default_factory=list)

    @property
    def qk_norm(self) -> bool:
        return any(i.kind == "qk_norm" for i in self.items)

    def resolved(self, first_step: int) -> Plan:
        return Plan([i.resolved(first_step) for i in self.items])

    def _last(self, kind: str, step: int, segment: int, default):
        value = default
        for i in self.items:
            if i.kind == kind and i.active(step, segment):
                value = i.value
        return value

    def lr_factor(self, step: int, segment: int = 0) -> float:
        f = 1.0
        for i in self.items:
            if i.kind == "lr_scale" and i.active(step, segment):
                f *= i.value
        return f

    def clip(self, step: int, default: float, segment: int = 0) -> float:
        return self._last("clip", step, segment, default)

    def z_loss(self, step: int, default: float, segment: int = 0) -> float:
        return self._last("z_loss", step, segment, default)

    def beta2(self, step: int, default: float, segment: int = 0) -> float:
        return self._last("beta2", step, segment, default)

    def eps(self, step: int, default: float, segment: int = 0) -> float:
        return self._last("eps", step, segment, default)

    def data_seed(self, step: int, default: int, segment: int = 0) -> int:
        return int(self._last("data_seed", step, segment, default))

    def skipped(self, step: int, segment: int = 0) -> bool:
        return any(
            i.kind == "skip" and i.active(step, segment) and step <= i.end for i in self.items
        )

    def bf16(self, step: int, segment: int = 0) -> bool:
        """Whether the step trains in bf16 (fp32's range: no loss scaling, no overflow)."""
        return any(i.kind == "bf16" and i.active(step, segment) for i in self.items)

    def resets_before(self, step: int, segment: int = 0) -> bool:
        return any(
            i.kind == "reset_opt" and i.start == step and i.active(step, segment)
            for i in self.items
        )

    def to_list(self) -> list[dict]:
        return [i.to_dict() for i in self.items]

    @classmethod
    def from_list(cls, items: list[dict]) -> Plan:
        return cls([Intervention(**d) for d in items])


def parse_item(text: str) -> Intervention | None:
    """One SPEC item; None for ``baseline``/``none``."""
    t = text.strip()
    if t in ("baseline", "none"):
        return None
    m = _ITEM.match(t)
    if not m or m["kind"] not in KINDS:
        raise UsageError(f"unknown intervention {t!r} (known: baseline, {', '.join(KINDS)})")
    kind, raw, at = m["kind"], m["value"], m["at"]
    if kind in _NEEDS_VALUE and raw is None:
        raise UsageError(f"intervention {t!r}: give a value, e.g. {kind}:{_example(kind)}")
    if kind not in _NEEDS_VALUE and raw is not None:
        raise UsageError(f"intervention {t!r}: {kind} takes no value")
    start = int(at) if at is not None else None
    if kind == "skip":
        if at is not None:
            raise UsageError(f"intervention {t!r}: write a skip as skip:A-B or skip:+N")
        return _skip(raw, t)
    if kind == "qk_norm" and at is not None:
        raise UsageError("qk_norm changes the architecture: it always applies from step 0")
    value = _number(raw, t) if raw is not None else None
    if kind == "data_seed" and value is not None and value != int(value):
        raise UsageError(f"intervention {t!r}: the seed must be an integer")
    if kind == "beta2" and value is not None and not 0 < value < 1:
        raise UsageError(f"intervention {t!r}: beta2 must be in (0, 1)")
    if kind == "eps" and value is not None and not 0 < value <= 1:
        raise UsageError(f"intervention {t!r}: eps must be in (0, 1]")
    return Intervention(kind=kind, value=value, start=start)


def _skip(raw: str, text: str) -> Intervention:
    if m := re.fullmatch(r"\+(\d+)", raw.strip()):
        if int(m[1]) < 1:
            raise UsageError(f"intervention {text!r}: skip at least one batch")
        return Intervention(kind="skip", count=int(m[1]))
    if m := re.fullmatch(r"(\d+)-(\d+)", raw.strip()):
        a, b = int(m[1]), int(m[2])
        if b < a or a < 1:
            raise UsageError(f"intervention {text!r}: need 1 <= A <= B in skip:A-B")
        return Intervention(kind="skip", start=a, end=b)
    raise UsageError(f"intervention {text!r}: write a skip as skip:A-B or skip:+N")


def _number(raw: str, text: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise UsageError(f"intervention {text!r}: {raw!r} is not a number") from None
    if v != v or v in (float("inf"), float("-inf")) or v < 0:
        raise UsageError(f"intervention {text!r}: the value must be a finite number >= 0")
    return v


def _example(kind: str) -> str:
    examples = {"lr_scale": "0.5", "skip": "+30", "clip": "1.0", "z_loss": "1e-4"}
    return {**examples, "beta2": "0.95", "eps": "1e-6"}.get(kind, "7")


def parse_spec(spec: str) -> Plan:
    """A comma-separated SPEC into a plan."""
    items = [parse_item(t) for t in spec.split(",") if t.strip()]
    if not items:
        raise UsageError("empty intervention spec (write baseline for no change)")
    return Plan([i for i in items if i is not None])


def parse_variant(text: str) -> tuple[str, Plan]:
    """``NAME=SPEC`` into (name, plan)."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise UsageError(f"variant {text!r}: write NAME=SPEC, e.g. half_lr=lr_scale:0.5")
    return name, parse_spec(spec)
