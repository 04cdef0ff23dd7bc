"""What a recording ran on: the settings outside the config that decide its bits.

The same seed gives the same bits only on the same kernels: the torch release, the CPU's
vector instruction set torch dispatches to (AVX2 and AVX-512 sum in different orders),
the intra-op thread count, the device, and for real-text data the corpus itself (the
standard library's sources differ between Python releases). A recording keeps them; a
replay elsewhere is told which differs, since a bitwise mismatch there is expected
rather than a bug.
"""

from __future__ import annotations

import platform

import torch

FIELDS = ("torch", "cpu_capability", "threads", "device", "machine", "corpus")


def current(device: str = "cpu", corpus: str | None = None) -> dict[str, str | int]:
    """The settings of this process (call after the engine's set-up: threads are set);
    ``corpus``: the SHA-256 of the real-text corpus, when the data is real text (another
    Python release has other standard-library sources)."""
    env: dict[str, str | int] = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "device": device,
        "machine": platform.machine(),
    }
    if corpus is not None:
        env["corpus"] = corpus
    if device.startswith("cuda") and torch.cuda.is_available():
        env["device"] = f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return env


def differences(recorded: dict | None, here: dict) -> list[str]:
    """``field: recorded -> here`` for each setting that differs (empty: none, or a
    recording made before settings were kept, which says nothing)."""
    if not isinstance(recorded, dict):
        return []
    return [
        f"{k}: {recorded[k]} -> {here.get(k)}"
        for k in FIELDS
        if k in recorded and recorded[k] != here.get(k)
    ]
