"""Per-step series of a synthetic training run, and the injections the detection
benchmark labels (spikes, precursor ramps, drifts, collapses, divergences).

All values are per optimizer step; ``gen_detect`` aggregates them into log records.
Series are numpy arrays indexed by ``step - 1``.
"""

from __future__ import annotations

import numpy as np

SLOT = 2500  # steps reserved for one incident
GROWTH_INTERVAL = 1000  # fp16 scaler: doubles the scale after this many quiet steps
STARTUP_LOG2 = 32  # the scaler starts at 2**32 and halves on each start-up overflow
SETTLED_LOG2 = 16


def heavy_noise(
    rng: np.random.Generator, n: int, sigma: float, clip: float | None = None
) -> np.ndarray:
    """Student-t (4 d.o.f.) noise scaled to standard deviation ``sigma`` (cut at
    ``clip`` deviations when given), plus a slow AR(1) wander of a third of it (batches
    of varying difficulty)."""
    t = rng.standard_t(4, n) / np.sqrt(2.0)
    if clip is not None:
        t = np.clip(t, -clip, clip)
    kernel = 0.99 ** np.arange(500)
    e = rng.standard_normal(n + kernel.size) * np.sqrt(1 - 0.99**2)
    ar = np.convolve(e, kernel, mode="full")[kernel.size : kernel.size + n]
    return sigma * (t + ar / 3.0)


def base_curves(n: int, rng: np.random.Generator, loss_floor: float) -> dict[str, np.ndarray]:
    """Noise-free log curves: loss (power-law descent), grad norm, activation norm,
    attention logit max, logz; and the step time in seconds."""
    s = np.arange(1, n + 1, dtype=float)
    loss = loss_floor + 9.0 * (1.0 + s / 150.0) ** -0.6
    grad = 0.25 + 2.0 * np.exp(-s / 300.0) + 0.1 * s / n
    act = 20.0 + 10.0 * (1.0 - np.exp(-s / 2000.0))
    attn = 15.0 + 5.0 * (1.0 - np.exp(-s / 5000.0))
    logz = 2.0 + 1.0 * (1.0 - np.exp(-s / 3000.0))
    return {
        "loss": np.log(loss),
        "grad_norm": np.log(grad),
        "act_norm": np.log(act),
        "attn_logit_max": np.log(attn),
        "logz": np.log(logz),
        "step_time_s": np.full(n, float(rng.uniform(0.8, 3.0))),
    }


def lr_schedule(n: int, warmup: int, peak: float) -> np.ndarray:
    """Linear warm-up then cosine decay to 10% of the peak."""
    s = np.arange(1, n + 1, dtype=float)
    warm = peak * s / warmup
    prog = np.clip((s - warmup) / max(n - warmup, 1), 0, 1)
    cos = peak * (0.1 + 0.45 * (1 + np.cos(np.pi * prog)))
    return np.where(s <= warmup, warm, cos)


def spike_shape(n: int, at: int, rise: int, tau: float) -> np.ndarray:
    """0..1 bump: linear rise over ``rise`` steps to 1 at step ``at``, then e^(-t/tau)."""
    s = np.arange(1, n + 1, dtype=float)
    up = np.clip((s - (at - rise)) / max(rise, 1), 0, 1)
    down = np.exp(-np.clip(s - at, 0, None) / tau)
    return np.where(s <= at, up, down) * (s > at - rise)


def ramp(n: int, start: int, end: int) -> np.ndarray:
    """0 before ``start``, rising linearly to 1 at ``end``, 1 after."""
    s = np.arange(1, n + 1, dtype=float)
    return np.clip((s - start) / max(end - start, 1), 0, 1)


def loss_scale(
    n: int, rng: np.random.Generator, forced: list[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """log2 loss scale per step and skipped iterations (0/1), from a dynamic scaler:
    start-up halvings from 2**32, growth every ``GROWTH_INTERVAL`` quiet steps, an
    overflow (halving, skipped step) some hundreds of steps after the scale passes its
    ceiling, and the ``forced`` overflows (step, count) of injected collapses."""
    skipped = np.zeros(n, dtype=np.int64)
    startup = STARTUP_LOG2 - SETTLED_LOG2
    skipped[:startup] = 1
    over = {int(s): c for s, c in forced}
    ceiling = SETTLED_LOG2 + 1
    level = np.empty(n)
    cur, quiet = float(STARTUP_LOG2), 0
    pending = -1
    for i in range(n):  # the scaler is a state machine; a benchmark generator may loop
        if i < startup:
            cur -= 1
        elif i + 1 in over or i == pending:
            cur -= 1.0 if i == pending else float(over[i + 1])
            skipped[i] = 1
            quiet, pending = 0, -1
        else:
            quiet += 1
            if quiet >= GROWTH_INTERVAL:
                cur, quiet = cur + 1, 0
                if cur > ceiling:
                    pending = i + int(rng.integers(50, 800))
        level[i] = cur
    return level, skipped
