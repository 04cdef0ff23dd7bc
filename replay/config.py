"""The replay run's configuration: model, data and training settings, JSON round-trip.

Threads: each training process runs on ``threads`` intra-op threads (default 1). CPU
results are bitwise reproducible for a fixed thread count, so the count is part of the
config; parallelism across variants and seeds comes from processes (``--jobs``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from logbook.errors import UsageError
from replay.data import DataConfig
from replay.model import ModelConfig


@dataclass(kw_only=True)
class TrainConfig:
    steps: int = 300
    lr: float = 3e-3  # peak LR
    warmup: int = 20
    min_lr_ratio: float = 0.1  # cosine floor, as a fraction of the peak
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    clip: float = 0.0  # max global grad norm; 0: no clipping
    batch_size: int = 16
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
        try:
            return cls(
                model=_build(ModelConfig, d.get("model", {})),
                data=_build(DataConfig, d.get("data", {})),
                train=_build(TrainConfig, d.get("train", {})),
            )
        except (TypeError, AttributeError) as exc:
            raise UsageError(f"bad replay config ({exc})") from None

    def check(self) -> ReplayConfig:
        """Refuse settings the engine cannot run, with a one-line reason."""
        t, m = self.train, self.model
        problems = [
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


def _build(cls, values: dict):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UsageError(f"bad replay config: unknown {cls.__name__} keys {unknown}")
    return cls(**values)


def tiny() -> ReplayConfig:
    """A debug config that runs a step in a few milliseconds (tests)."""
    return ReplayConfig(
        model=ModelConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=16),
        data=DataConfig(n_phrases=64),
        train=TrainConfig(steps=20, warmup=4, batch_size=4, lr=1e-2),
    )
