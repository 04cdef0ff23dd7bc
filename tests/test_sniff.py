"""Format sniffing: SNIFF_MAX is a true bound, and skipping formats by it never changes
which format a file is given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import parsers
from logbook.errors import InputError
from logbook.textio import head_lines

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "logs"
TEXT_SUFFIXES = {".log", ".txt", ".jsonl", ".csv", ".md", ".json"}


def _text_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in TEXT_SUFFIXES and not p.name.endswith(".expected.jsonl")
    )


def _full_scores(path: Path) -> dict[str, int]:
    head = head_lines(path, parsers.SNIFF_LINES)
    return {name: mod.sniff(head) for name, mod in parsers.FORMATS.items()}


FILES = _text_files(ROOT / "fixtures") + (_text_files(CORPUS) if CORPUS.is_dir() else [])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_sniff_max_bounds_every_score(path: Path) -> None:
    scores = _full_scores(path)
    for name, mod in parsers.FORMATS.items():
        cap = getattr(mod, "SNIFF_MAX", None)
        if cap is not None:
            assert scores[name] <= cap, (name, scores[name], cap)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_skipping_gives_the_format_full_scoring_gives(path: Path) -> None:
    scores = _full_scores(path)
    best = max(scores, key=lambda k: scores[k])
    by_path = {
        n: m.sniff_path(path) for n, m in parsers.FORMATS.items() if hasattr(m, "sniff_path")
    }
    claimed = max(by_path, key=lambda k: by_path[k])
    if by_path[claimed] > 0:  # (a file a format knows by its path: MLflow's metric file)
        best = claimed
    elif path.suffix in parsers.PROSE_SUFFIXES:  # markdown is read as prose, always
        best = "chronicle"
    elif scores[best] <= 0:  # not a log (a replay config, a report input, a Git LFS pointer)
        with pytest.raises(InputError, match="unrecognized log format|a Git LFS pointer"):
            parsers.sniff(path)
        return
    assert parsers.sniff(path) == best


def test_every_format_declares_its_bound() -> None:
    missing = [n for n, m in parsers.FORMATS.items() if not hasattr(m, "SNIFF_MAX")]
    assert missing == []


def test_the_registry_states_each_formats_bound_and_path_reading() -> None:
    # the registry keeps both facts so that sniffing imports only what it asks
    for name, (_module, cap, paths) in parsers._REGISTRY.items():
        mod = parsers.FORMATS[name]
        assert cap == mod.SNIFF_MAX, name
        assert hasattr(mod, "sniff_path") == paths, name


def test_sniffing_a_megatron_log_loads_few_formats() -> None:
    code = (
        "import sys, parsers; parsers.sniff('fixtures/megatron/crash_restarts.log');"
        "print(sorted(m for m in sys.modules if m.startswith('parsers.nanogpt')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
