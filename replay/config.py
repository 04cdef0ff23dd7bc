"""The replay run's configuration: model, data and training settings, JSON round-trip.

Threads: each training process runs on ``threads`` intra-op threads (default 1). CPU
results are bitwise reproducible for a fixed thread count, so the count is part of the
config; parallelism across variants and seeds comes from processes (``--jobs``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from logbook.errors import UsageError
from replay.data import BAD_KINDS, SOURCES, DataConfig
from replay.model import ModelConfig


@dataclass(kw_only=True)
class TrainConfig:
    steps: int = 300
    lr: float = 2e-3  # peak LR
    warmup: int = 30
    min_lr_ratio: float = 0.1  # cosine floor, as a fraction of the peak
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    clip: float = 0.0  # max global grad norm; 0: no clipping
    batch_size: int = 32
    seed: int = 0  # model init and data order
    z_loss: float = 0.0
    fp16: bool = False  # emulate fp16 dynamic loss scaling
    init_scale: float = 65536.0
    scale_window: int = 200
    min_scale: float = 1.0
    threads: int = 1
    device: str = "cpu"


@dataclass(kw_only=True)
class ReplayConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return {"model": asdict(self.model), "data": asdict(self.data), "train": asdict(self.train)}

    @classmethod
    def from_dict(cls, d: dict) -> ReplayConfig:
        if not isinstance(d, dict):
            raise UsageError("bad replay config: not a mapping of model/data/train settings")
        try:
            return cls(
                model=_build(ModelConfig, d.get("model", {}), "model"),
                data=_build(DataConfig, d.get("data", {}), "data"),
                train=_build(TrainConfig, d.get("train", {}), "train"),
            )
        except (TypeError, AttributeError) as exc:
            raise UsageError(f"bad replay config ({exc})") from None

    def check(self) -> ReplayConfig:
        """Refuse settings the engine cannot run, with a one-line reason."""
        t, m, d = self.train, self.model, self.data
        for part, obj in (("model", m), ("data", self.data), ("train", t)):
            for key in LIMITS[part]:
                _value(part, key, getattr(obj, key))
        params = m.n_layer * 12 * m.n_embd**2 + (m.vocab_size + m.block_size) * m.n_embd
        problems = [
            (params > MAX_PARAMS, f"a model of {params:,} parameters (at most {MAX_PARAMS:,})"),
            (self.data.min_len > self.data.max_len, "data.min_len must be <= data.max_len"),
            (d.source not in SOURCES, f"data.source must be one of {list(SOURCES)}"),
            (d.bad_kind not in BAD_KINDS, f"data.bad_kind must be one of {list(BAD_KINDS)}"),
            (
                d.source == "stdlib" and m.vocab_size < 256,
                "data.source 'stdlib' is bytes: model.vocab_size must be >= 256",
            ),
            (t.steps < 1, "steps must be >= 1"),
            (t.lr <= 0, "lr must be > 0"),
            (t.warmup < 0, "warmup must be >= 0"),
            (t.batch_size < 1, "batch size must be >= 1"),
            (t.clip < 0, "clip must be >= 0"),
            (t.z_loss < 0, "z-loss must be >= 0"),
            (t.threads < 1, "threads must be >= 1"),
            (m.n_embd % m.n_head != 0, "n_embd must be a multiple of n_head"),
            (min(m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size) < 1, "bad model size"),
        ]
        for bad, why in problems:
            if bad:
                raise UsageError(f"replay config: {why}")
        return self


# Bounds of every setting: (type, lowest, highest); None: unbounded on that side.
_I64 = 2**63 - 1
LIMITS: dict[str, dict[str, tuple]] = {
    "model": {
        "vocab_size": (int, 2, 65_536),
        "block_size": (int, 1, 8_192),
        "n_layer": (int, 1, 96),
        "n_head": (int, 1, 128),
        "n_embd": (int, 1, 8_192),
        "qk_norm": (bool, None, None),
        "init_std": (float, 0.0, 1.0),
    },
    "data": {
        "source": (str, None, None),
        "max_bytes": (int, 65_536, 1_000_000_000),
        "bad_from": (int, 0, _I64),
        "bad_steps": (int, 0, 10_000_000),
        "pool_from": (int, 0, _I64),
        "pool_size": (int, 0, 10_000_000),
        "bad_kind": (str, None, None),
        "language_seed": (int, 0, _I64),
        "n_phrases": (int, 1, 1_000_000),
        "min_len": (int, 1, 8_192),
        "max_len": (int, 1, 8_192),
        "zipf": (float, 0.0, 10.0),
        "noise": (float, 0.0, 1.0),
    },
    "train": {
        "steps": (int, 1, 10_000_000),
        "lr": (float, 0.0, 100.0),
        "warmup": (int, 0, 10_000_000),
        "min_lr_ratio": (float, 0.0, 1.0),
        "weight_decay": (float, 0.0, 100.0),
        "beta1": (float, 0.0, 1.0),
        "beta2": (float, 0.0, 1.0),
        "eps": (float, 0.0, 1.0),
        "clip": (float, 0.0, 1e12),
        "batch_size": (int, 1, 65_536),
        "seed": (int, 0, _I64),
        "z_loss": (float, 0.0, 100.0),
        "fp16": (bool, None, None),
        "init_scale": (float, 1.0, 2.0**64),
        "scale_window": (int, 1, 10_000_000),
        "min_scale": (float, 0.0, 2.0**64),
        "threads": (int, 1, 1_024),
        "device": (str, None, None),
    },
}
MAX_PARAMS = 2_000_000_000  # a model this replay would build, at most (8 GB in fp32)


def _build(cls, values: dict, part: str):
    if not isinstance(values, dict):
        raise UsageError(f"bad replay config: {part} must be a mapping of settings")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UsageError(f"bad replay config: unknown {cls.__name__} keys {unknown}")
    return cls(**{k: _value(part, k, v) for k, v in values.items()})


def _value(part: str, key: str, value):
    """``value`` of setting ``part.key`` checked against its type and bounds (pydantic
    does the type: ``"4"`` is 4, ``"four"`` is refused)."""
    from pydantic import TypeAdapter, ValidationError

    tp, lo, hi = LIMITS[part][key]
    try:
        got = TypeAdapter(tp).validate_python(value, strict=tp is bool or None)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"].lower()
        raise UsageError(f"replay config: {part}.{key} = {value!r}: {why}") from None
    if tp is float and got != got:
        raise UsageError(f"replay config: {part}.{key} = {value!r}: not a number")
    if (lo is not None and got < lo) or (hi is not None and got > hi):
        raise UsageError(f"replay config: {part}.{key} = {value!r}: must be in [{lo}, {hi}]")
    return got


def tiny() -> ReplayConfig:
    """A debug config that runs a step in a few milliseconds (tests)."""
    return ReplayConfig(
        model=ModelConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=16),
        data=DataConfig(source="phrases", n_phrases=64),
        train=TrainConfig(steps=20, warmup=4, batch_size=4, lr=1e-2),
    )
