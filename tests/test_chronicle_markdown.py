"""Markdown chronicles: pasted log blocks, sniffing, and the real OPT and BigScience notes."""

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

import parsers
from logbook.parsed import Parsed
from logbook.textio import head_lines, read_lines
from parsers import chronicle
from parsers.chronicle import parse_chronicle
from parsers.chronicle.blocks import blocks, classify

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "chronicle"
CORPUS = ROOT.parent / "shared" / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")


def _stub_parse(lines: pl.DataFrame, name: str) -> Parsed:
    rows = lines.filter(pl.col("text").str.starts_with('{"step"'))
    fields = rows.get_column("text").str.json_decode(
        pl.Struct({"step": pl.Int64, "loss": pl.Float64})
    )
    metrics = pl.DataFrame({"line": rows.get_column("line")}).with_columns(
        fields.struct.field("step"), fields.struct.field("loss")
    )
    other = lines.filter(~pl.col("text").str.starts_with('{"step"')).get_column("line")
    return Parsed(metrics=metrics, unrecognized=other)


STUB = SimpleNamespace(
    sniff=lambda head: 60 if any(h.startswith('{"step"') for h in head) else 0, parse=_stub_parse
)


def parse(path: Path, tz: str = "UTC") -> Parsed:
    lines, _ = read_lines(path)
    return parse_chronicle(lines, path.name, tz)


def test_pasted_log_block_goes_to_the_metric_parser(monkeypatch):
    monkeypatch.setattr(parsers, "FORMATS", {"stub": STUB})
    p = parse(FIXTURES / "excerpt.md")
    assert p.metrics.select("line", "step", "loss").rows() == [(6, 100, 2.5), (7, 110, 7.0)]
    assert p.unrecognized.to_list() == [8]
    assert p.ignored == 5  # three blank lines, two fence lines
    assert [(e.kind, e.source.line) for e in p.events] == [("note", 3), ("restart", 11)]
    day = datetime(2023, 2, 1, tzinfo=UTC)
    assert [(e.time, e.assumed_tz) for e in p.events] == [(day, "UTC"), (day, "UTC")]
    assert (p.events[1].resume_step, p.events[1].step) == (100, 100)
    assert p.meta["caveats"][-1] == "excerpt.md: metric records come from log excerpts in the text"


def test_an_excerpt_pasted_again_is_read_once_and_placed_at_each_paste(monkeypatch, tmp_path):
    calls = []

    def counted(lines, name):
        calls.append(lines.height)
        return _stub_parse(lines, name)

    monkeypatch.setattr(
        parsers, "FORMATS", {"stub": SimpleNamespace(sniff=STUB.sniff, parse=counted)}
    )
    text = (FIXTURES / "excerpt.md").read_text()
    doc = tmp_path / "twice.md"
    doc.write_text(text + "\n" + text)  # the second copy 12 lines down
    p = parse(doc)
    assert calls == [3]  # read once
    assert p.metrics.select("line", "step").rows() == [(6, 100), (7, 110), (18, 100), (19, 110)]
    assert p.unrecognized.to_list() == [8, 20]


def test_without_a_matching_parser_the_block_is_text(monkeypatch):
    monkeypatch.setattr(parsers, "FORMATS", {})
    p = parse(FIXTURES / "excerpt.md")
    assert p.metrics.height == 0 and p.unrecognized.len() == 0
    assert [(e.kind, e.source.line) for e in p.events] == [
        ("note", 3),
        ("note", 5),
        ("restart", 11),
    ]
    assert p.events[1].text.splitlines()[1] == '{"step": 100, "loss": 2.5}'


def test_a_failing_metric_parser_does_not_lose_the_text(monkeypatch):
    def broken(lines, name):
        raise IndexError("list index out of range")

    monkeypatch.setattr(
        parsers, "FORMATS", {"stub": SimpleNamespace(sniff=STUB.sniff, parse=broken)}
    )
    p = parse(FIXTURES / "excerpt.md")
    assert [e.kind for e in p.events] == ["note", "note", "restart"]
    assert p.meta["caveats"][0] == (
        "excerpt.md:6: the stub parser failed on this excerpt "
        "(IndexError('list index out of range')); kept as text"
    )


def test_weak_sniff_does_not_claim_a_block(monkeypatch):
    weak = SimpleNamespace(sniff=lambda head: 5, parse=_stub_parse)
    monkeypatch.setattr(parsers, "FORMATS", {"weak": weak})
    assert parse(FIXTURES / "excerpt.md").metrics.height == 0


def test_sniff_scores_chronicles_low_and_text_zero():
    assert chronicle.sniff(head_lines(FIXTURES / "logbook_entries.txt")) == 30
    assert chronicle.sniff(head_lines(FIXTURES / "opt175b_logbook_toc.txt")) == 30
    assert chronicle.sniff(head_lines(FIXTURES / "update.md")) == 20
    assert chronicle.sniff(["dear diary", "the loss went up"]) == 0
    assert chronicle.sniff(["# Notes", "", "Nothing is dated here at all, not one line."]) == 0
    assert chronicle.sniff([]) == 0
    log = [f"2020-07-17 04:0{i}:14 | INFO | train_inner | epoch 001: loss=3.1" for i in range(9)]
    assert chronicle.sniff(log) == 0


@needs_corpus
def test_sniff_leaves_every_corpus_log_alone():
    logs = sorted((CORPUS / "logs").iterdir())
    assert logs
    assert {p.name: chronicle.sniff(head_lines(p, 5000)) for p in logs} == {p.name: 0 for p in logs}


@needs_corpus
@pytest.mark.parametrize(
    ("name", "score"),
    [
        ("10_percent_update.md", 20),
        ("27_percent_update.md", 20),
        ("56_percent_update.md", 20),
        ("final_update.md", 20),
        ("bigscience_train_tr11-176B-ml_chronicles.md", 20),
        ("bigscience_train_tr1-13B-base_chronicles.md", 15),
    ],
)
def test_sniff_recognizes_dated_corpus_chronicles(name, score):
    assert chronicle.sniff(head_lines(CORPUS / "chronicles" / name, 5000)) == score


# Hand lists: (line, kind) of every restart, LR change, config change, hardware failure
# and data skip a reader finds in the text (notes left out).
HAND = {
    "10_percent_update.md": [
        (16, "restart"),
        (17, "restart"),
        (29, "lr_change"),
        (29, "config_change"),  # clipping 1.5
        (29, "config_change"),  # clipping 1.0
        (29, "config_change"),  # validation frequency
        (29, "hardware_failure"),
        (29, "restart"),
        (31, "config_change"),  # weight decay 0.1
        (31, "config_change"),  # beta2 0.95
        (31, "lr_change"),
        (31, "config_change"),  # ReLU
        (31, "config_change"),  # MHA calculation
        (57, "restart"),
        (57, "hardware_failure"),
    ],
    "27_percent_update.md": [
        (12, "hardware_failure"),
        (19, "hardware_failure"),
        (23, "restart"),
        (23, "config_change"),  # beta1 0
        (23, "config_change"),  # epsilon 1
        (23, "config_change"),  # vanilla SGD
        (25, "lr_change"),
        (25, "config_change"),  # back to Adam
    ],
    "56_percent_update.md": [
        (32, "hardware_failure"),
        (43, "lr_change"),
        (43, "lr_change"),
        (53, "config_change"),
    ],
    "final_update.md": [
        (27, "hardware_failure"),
        (27, "restart"),
        (29, "hardware_failure"),
    ],
}
# floors for precision and recall of (line, kind) against the hand lists
FLOORS = {
    "10_percent_update.md": (0.85, 0.85),
    "27_percent_update.md": (0.75, 0.85),
    "56_percent_update.md": (0.65, 1.0),
    "final_update.md": (0.75, 1.0),
}


def precision_recall(found: Counter, hand: Counter) -> tuple[float, float]:
    hits = sum((found & hand).values())
    return hits / max(1, sum(found.values())), hits / max(1, sum(hand.values()))


@needs_corpus
@pytest.mark.parametrize("name", sorted(HAND))
def test_opt_updates_against_hand_lists(name, monkeypatch):
    monkeypatch.setattr(parsers, "FORMATS", {})
    events = parse(CORPUS / "chronicles" / name).events
    found = Counter((e.source.line, e.kind) for e in events if e.kind != "note")
    precision, recall = precision_recall(found, Counter(HAND[name]))
    assert precision >= FLOORS[name][0] and recall >= FLOORS[name][1], (precision, recall)


@needs_corpus
def test_opt_56_percent_facts():
    events = parse(CORPUS / "chronicles" / "56_percent_update.md").events
    lr = [e for e in events if e.kind == "lr_change"]
    assert [(e.run, e.source.line, e.manual) for e in lr] == [
        ("12.43", 43, True),
        ("12.45.2", 43, True),
    ]
    (upgrade,) = [e for e in events if e.kind == "config_change"]
    assert (upgrade.key, upgrade.old, upgrade.new) == ("megatron_version", "2.4", "2.6")
    dec6 = next(e for e in events if e.kind == "hardware_failure" and e.source.line == 32)
    assert dec6.time == datetime(2021, 12, 6, tzinfo=UTC)
    assert dec6.cause == "ecc, lost_gpu, node_failure, node_swap"


@needs_corpus
def test_opt_final_update_cluster_deletion():
    events = parse(CORPUS / "chronicles" / "final_update.md").events
    deleted = next(e for e in events if e.kind == "hardware_failure" and e.source.line == 27)
    assert deleted.time == datetime(2021, 12, 21, tzinfo=UTC)
    assert "cluster_deleted" in deleted.cause
    done = next(e for e in events if e.source.line == 6)
    assert (done.kind, done.time, done.assumed_tz) == (
        "note",
        datetime(2022, 1, 6, 20, 46, tzinfo=UTC),
        None,
    )


@needs_corpus
def test_bigscience_tr8b_rollbacks_and_skips(monkeypatch):
    monkeypatch.setattr(parsers, "FORMATS", {})
    p = parse(CORPUS / "chronicles" / "bigscience_train_tr8b-104B_chronicles.md")
    restarts = {(e.run, e.resume_step) for e in p.events if e.kind == "restart" and e.resume_step}
    assert {
        ("embed-norm-exp-2", 13250),
        ("embed-norm-exp-3", 16651),
        ("bnb-exp-6", 12000),
    } <= restarts
    skips = {(e.run, e.start_step, e.end_step) for e in p.events if e.kind == "data_skip"}
    assert ("embed-norm-exp-3", 16652, 18500) in skips
    lr = {(e.old, e.new) for e in p.events if e.kind == "lr_change" and e.new is not None}
    assert {(6e-5, 1e-4), (1e-4, 6e-5), (5.999e-05, 5.842e-05)} <= lr
    assert p.meta["lineage"]["bnb-exp-3"] == "bnb-exp-1"  # "Rollback to Exp 01"


@needs_corpus
@pytest.mark.parametrize(
    "path", sorted((CORPUS / "chronicles").glob("*")) if CORPUS.is_dir() else []
)
def test_every_prose_block_of_the_corpus_becomes_events(path, monkeypatch):
    monkeypatch.setattr(parsers, "FORMATS", {})
    lines, _ = read_lines(path)
    p = parse_chronicle(lines, path.name)
    prose = [b for b in blocks(classify(lines)) if b.kind not in ("heading", "meta")]
    assert {b.text for b in prose} == {e.text for e in p.events}
    assert p.unrecognized.len() == 0
