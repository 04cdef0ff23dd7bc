"""Entry-line logbooks: the transcribed OPT-175B table of contents and our own fixture."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import parsers
from logbook.schema import event_to_dict
from logbook.textio import read_lines
from parsers.chronicle import parse_chronicle

FIXTURES = Path("fixtures") / "chronicle"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture
def no_metric_formats(monkeypatch):
    """Pasted log lines stay text: the expectations do not depend on other parsers."""
    monkeypatch.setattr(parsers, "FORMATS", {})


def parse(path: Path, tz: str = "UTC"):
    lines, _ = read_lines(path)
    return parse_chronicle(lines, path.as_posix(), tz)


def expectations() -> list[Path]:
    return sorted(p.relative_to(ROOT) for p in (ROOT / FIXTURES).glob("*.expected.jsonl"))


def source_of(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.jsonl")
    found = [
        p
        for p in expected.parent.iterdir()
        if p.name.startswith(stem + ".") and not p.name.endswith(".expected.jsonl")
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("expected", expectations(), ids=lambda p: p.name)
def test_fixture_events_exactly(expected, no_metric_formats):
    got = [{"type": "event", **event_to_dict(e)} for e in parse(source_of(expected)).events]
    want = [json.loads(line) for line in expected.read_text().splitlines()]
    assert got == want


def test_every_fixture_has_its_expectation():
    sources = {p.name for p in (ROOT / FIXTURES).iterdir() if not p.name.endswith(".jsonl")}
    covered = {source_of(e).name for e in expectations()}
    # the OPT table of contents and the excerpt are checked by the tests below
    assert sources - covered == {"opt175b_logbook_toc.txt", "excerpt.md"}


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


# line, kinds (in order), run, UTC time -- read by hand off the transcription
OPT_TOC = [
    (12, ["restart", "config_change", "lr_change"], "12.38", utc(2021, 12, 1, 13, 39)),
    (13, ["note"], "12.37", utc(2021, 12, 1, 7, 21)),
    (14, ["restart"], "12.37", utc(2021, 12, 1, 0, 24)),
    (15, ["note"], None, utc(2021, 11, 21, 0, 24)),
    (16, ["restart", "config_change"], "12.36", utc(2021, 11, 30, 18, 10)),
    (17, ["restart", "config_change"], "12.35", utc(2021, 11, 30, 17, 0)),
    (18, ["restart"], "12.34", utc(2021, 11, 30, 14, 0)),
    (19, ["restart"], "12.34", utc(2021, 11, 30, 3, 43)),
    (20, ["restart"], "12.33", utc(2021, 12, 1, 3, 43)),
    (21, ["restart"], "12.33", utc(2021, 11, 28, 23, 34)),
    (22, ["restart"], "12.32", utc(2021, 11, 28, 22, 52)),
    (23, ["restart"], "12.31", utc(2021, 11, 28, 17, 28)),
    (24, ["restart"], "12.30", utc(2021, 11, 28, 15, 9)),
    (25, ["restart"], "12.29", utc(2021, 11, 28, 14, 41)),
    (26, ["restart"], "12.28", utc(2021, 11, 28, 8, 20)),
    (27, ["restart"], "12.27", utc(2021, 11, 28, 6, 50)),
    (28, ["restart"], "12.26", utc(2021, 11, 28, 4, 39)),  # "11:39 ET": pm fits the runs
    (29, ["restart"], "12.25", utc(2021, 11, 28, 2, 10)),
    (30, ["restart"], "12.24", utc(2021, 11, 27, 18, 59)),
    (31, ["note"], None, utc(2021, 11, 26, 14, 47)),
    (32, ["restart"], "12.23", utc(2021, 11, 25, 13, 53)),
    (33, ["restart"], "12.22", utc(2021, 11, 25, 16, 35)),
    (34, ["restart"], "12.21", utc(2021, 11, 25, 16, 20)),
    (35, ["restart"], "12.21", utc(2021, 11, 25, 4, 18)),
    (36, ["restart"], "12.20", utc(2021, 11, 25, 3, 40)),
    (37, ["restart"], "12.19", utc(2021, 11, 24, 20, 30)),
    (38, ["restart"], "12.18", utc(2021, 11, 24, 19, 10)),
    (39, ["restart"], "12.17", utc(2021, 11, 24, 18, 0)),
    (40, ["restart"], "12.16", utc(2021, 11, 23, 10, 50)),
    (41, ["restart"], "12.15", utc(2021, 11, 22, 7, 45)),
    (42, ["restart"], "12.14", utc(2021, 11, 21, 16, 15)),
    (43, ["restart"], "12.13", utc(2021, 11, 21, 15, 0)),
    (44, ["note"], "12.X", utc(2021, 11, 21)),
    (45, ["restart"], "12.12", utc(2021, 11, 20, 21, 30)),
    (46, ["restart"], "12.11", utc(2021, 11, 19, 9, 30)),
    (47, ["note"], None, utc(2021, 11, 18)),
    (48, ["note"], "12.10", utc(2021, 11, 18, 17, 30)),
]
NO_ZONE = {40, 41, 42, 43, 44, 45, 46, 47, 48}


def test_opt_logbook_toc_all_37_entries():
    parsed = parse(FIXTURES / "opt175b_logbook_toc.txt")
    by_line: dict[int, list] = {}
    for e in parsed.events:
        by_line.setdefault(e.source.line, []).append(e)
    assert [e.kind for e in by_line.pop(11)] == ["note"]  # the undated "Analysis" line
    assert len(OPT_TOC) == 37
    for line, kinds, run, when in OPT_TOC:
        events = by_line.pop(line)
        assert [e.kind for e in events] == kinds, line
        assert {e.run for e in events} == {run}, line
        assert {e.time for e in events} == {when}, line
        assert {e.assumed_tz for e in events} == {"UTC" if line in NO_ZONE else None}, line
    assert by_line == {}
    assert parsed.ignored == 10  # the collector's comment lines
    assert parsed.unrecognized.len() == 0


def test_opt_restart_from_37k():
    e = next(e for e in parse(FIXTURES / "opt175b_logbook_toc.txt").events if e.source.line == 16)
    assert (e.kind, e.run, e.resume_step, e.step, e.step_source) == (
        "restart",
        "12.36",
        37000,
        37000,
        "text",
    )
    assert e.time == utc(2021, 11, 30, 18, 10)
    assert e.text.startswith("2021-11-30 10:10am PT: 12.36 restart from 37k, SGD mimicking")
    change = next(
        x
        for x in parse(FIXTURES / "opt175b_logbook_toc.txt").events
        if x.source.line == 16 and x.kind == "config_change"
    )
    assert (change.key, change.new) == ("optimizer", "sgd")


def test_opt_toc_with_default_zone():
    events = parse(FIXTURES / "opt175b_logbook_toc.txt", tz="ET").events
    e = next(e for e in events if e.source.line == 40)
    assert (e.time, e.assumed_tz) == (utc(2021, 11, 23, 15, 50), "ET")
    e = next(e for e in events if e.source.line == 16)
    assert (e.time, e.assumed_tz) == (utc(2021, 11, 30, 18, 10), None)


def test_opt_toc_lineage_and_caveats():
    meta = parse(FIXTURES / "opt175b_logbook_toc.txt").meta
    assert meta["lineage"]["12.37"] == "12.36"  # "Manual requeue of 12.36"
    assert meta["lineage"]["12.23"] == "12.22"
    assert meta["lineage"]["12.11"] == "12.10"
    assert len(meta["lineage"]) == 28
    assert meta["caveats"] == [
        "fixtures/chronicle/opt175b_logbook_toc.txt:28: clock time without am/pm read as pm"
        " (fits the order of the runs)",
        "fixtures/chronicle/opt175b_logbook_toc.txt: 9 event time(s) written without a zone,"
        " read as UTC (set --tz)",
    ]


def test_own_logbook_lineage():
    meta = parse(FIXTURES / "logbook_entries.txt").meta
    assert meta["lineage"] == {
        "7.06": "7.05",
        "7.06.1": "7.06",
        "7.07": "7.06.1",
        "7.08": "7.07",
        "7.09": "7.08",
        "7.10": "7.09",
        "7.11": "7.10",
        "7.12": "7.11",
        "7.13": "7.12",
        "7.14": "7.13",
        "7.15": "7.14",
    }


def test_multiline_body_belongs_to_its_entry():
    events = parse(FIXTURES / "logbook_entries.txt").events
    seed, wd, beta2 = [e for e in events if e.kind == "config_change" and e.run == "7.11"]
    assert (seed.key, seed.source.line) == ("seed", 8)
    assert (wd.key, wd.old, wd.new, wd.source.line) == ("weight_decay", 0.05, 0.1, 9)
    assert (beta2.key, beta2.old, beta2.new, beta2.source.line) == ("beta2", 0.98, 0.95, 10)
    assert seed.time == wd.time == beta2.time == utc(2023, 3, 12, 3, 0)
    fox = next(e for e in events if e.source.line == 20)
    assert fox.kind == "restart"  # the first entry of 7.05 in time is its launch
    assert fox.text.splitlines()[1:] == [
        "  the quick brown fox jumps over the lazy dog",
        "  and keeps going on a second line",
    ]


def test_unparseable_prose_is_a_note_never_an_error(tmp_path):
    p = tmp_path / "diary.txt"
    p.write_text("dear diary\nthe loss went up\n\n2023-01-01 9am: ???\n")
    events = parse(p).events
    assert [(e.kind, e.source.line, e.text) for e in events] == [
        ("note", 1, "dear diary\nthe loss went up"),
        ("note", 4, "2023-01-01 9am: ???"),
    ]
    assert events[1].time == utc(2023, 1, 1, 9)


def test_parent_run_on_events_where_the_schema_has_it():
    from logbook.schema import EventBase

    events = parse(FIXTURES / "opt175b_logbook_toc.txt").events
    requeue = next(e for e in events if e.source.line == 14)
    expected = "12.36" if "parent_run" in EventBase.model_fields else None
    assert getattr(requeue, "parent_run", None) == expected


def regenerate() -> None:
    """Rewrite the ``*.expected.jsonl`` files from the parser's current output (run
    ``python tests/test_chronicle_entries.py`` from the repository root after a
    deliberate change, then review the diff line by line)."""
    saved = dict(parsers.FORMATS)
    parsers.FORMATS.clear()
    try:
        for expected in expectations():
            events = parse(source_of(expected)).events
            rows = [json.dumps({"type": "event", **event_to_dict(e)}) for e in events]
            expected.write_text("".join(r + "\n" for r in rows))
    finally:
        parsers.FORMATS.update(saved)


if __name__ == "__main__":
    regenerate()
