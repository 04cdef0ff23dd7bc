"""Fuzzing of every reader: mutated fixtures (byte flips, truncation, lines deleted,
duplicated or swapped, odd and huge numbers, NaN/inf tokens, empty values, very long
lines, NUL bytes, byte-order marks, other encodings, CR / CRLF / LF mixed) through
``logbook parse -o`` and ``logbook detect --json``, each checked for: exit 0, 1 or 2
only, no internal error, one line on exit 2, at most 10 s for an input of at most 1 MB,
and a line accounting that adds up.

Deterministic (``derandomize``, no example database). ``LOGBOOK_FUZZ_EXAMPLES`` sets the
examples per format (default 25, the quick profile CI runs); the long profile is
``python -m bench.fuzz --examples 10000`` (see bench/RESULTS.md).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench._mutations import N_OPS, SEEDS, TIME_LIMIT_S, mutate, run_case, seed_bytes

EXAMPLES = int(os.environ.get("LOGBOOK_FUZZ_EXAMPLES", "25"))

OPS = st.lists(
    st.tuples(st.integers(0, N_OPS - 1), st.integers(0, 10**6), st.integers(0, 10**6)),
    min_size=1,
    max_size=3,
)


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_mutated_inputs_keep_every_invariant(fmt, tmp_path_factory):
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(seed=st.integers(0, len(SEEDS[fmt]) - 1), ops=OPS)
    def check(seed, ops):
        work = tmp_path_factory.mktemp("case")
        assert run_case(fmt, SEEDS[fmt][seed], ops, work) == []

    check()


def test_every_seed_is_there_and_read_as_its_format():
    import parsers

    assert set(SEEDS) == set(parsers.FORMATS)  # every format is fuzzed
    for fmt, paths in SEEDS.items():
        for path in paths:
            assert seed_bytes(path), path
            if fmt not in ("hf-trainer", "tensorboard"):
                assert parsers.sniff(path) == fmt, path


def test_mutations_are_deterministic_and_change_the_input():
    data = seed_bytes(SEEDS["megatron"][0])
    assert mutate(data, [(1, 3, 5)]) == mutate(data, [(1, 3, 5)])
    assert mutate(data, [(12, 0, 0)]).count(b"\r") == data.count(b"\n")  # all CR
    assert b"\x00" in mutate(data, [(9, 10, 3)])
    assert len(mutate(data, [(8, 1, 10)])) > len(data)  # a line repeated 11 times


def test_a_broken_invariant_is_reported(tmp_path, monkeypatch):
    # the checker itself: an internal error and a slow run are both caught
    from bench import _mutations
    from logbook import cli_parse

    def boom(*_a, **_k):
        raise ZeroDivisionError("x")

    monkeypatch.setattr(cli_parse, "summary", boom)
    problems = _mutations.run_case("text", SEEDS["text"][0], [(2, 0, 0)], tmp_path)
    assert problems == [
        "parse: logbook: error: internal error: ZeroDivisionError: x (LOGBOOK_DEBUG=1 shows where)"
    ]
    assert TIME_LIMIT_S == 10.0


# Mutations the long profile once broke an invariant with (each fixed since): kept as
# regression cases, whatever the random draws of the profile do.
FOUND = [
    ("wandb", "fixtures/wandb/chart_two_runs.csv", [(1, 181439, 8)]),  # cut in the header
    ("metaseq", "fixtures/metaseq/wrapped_glued.log", [(8, 8801, 169688)]),  # glued copies
    ("jsonl", "fixtures/jsonl/messy_crlf.jsonl", [(6, 973219, 191059), (6, 552299, 837040)]),
    (
        "fairseq-simple",
        "fixtures/real/fairseq/fairseq_issue2584_two_line_paste_no_timestamp.log",
        [(5, 390092, 450818), (13, 321150, 995883), (7, 946078, 168056)],
    ),  # Arabic-Indic digits as a step
    ("logbook", "fixtures/text/two_runs.expected.jsonl", [(0, 852631, 930395)]),
    (
        "logbook",
        "fixtures/text/two_runs.expected.jsonl",
        [(10, 335333, 127521), (5, 411809, 415094), (3, 397978, 726539)],
    ),
    ("chronicle", "fixtures/chronicle/excerpt.md", [(7, 471664, 396250)]),
    (
        "metaseq",
        "fixtures/metaseq/wrapped_glued.log",
        [(8, 831271, 808233), (6, 135929, 442416), (2, 142337, 623685)],
    ),  # year 0
    (
        "hf-trainer",
        "fixtures/hf_trainer/rewind/checkpoint-4/trainer_state.json",
        [(6, 563044, 616037), (8, 285040, 965131)],
    ),
    (
        "fairseq-simple",
        "fixtures/real/fairseq/fairseq_issue1678_huge_loss_overflow_keyerror_crash.log",
        [(3, 189956, 108514), (6, 400653, 529564)],
    ),
    (
        "nanogpt",
        "fixtures/real/nanogpt/issue210_finetune_config_echo_nan_iter1.log",
        [(5, 115324, 448694), (7, 555010, 38997), (3, 844006, 466599)],
    ),  # a 5,000-digit step in an eval line
    (
        "megatron-golden",
        "fixtures/real/megatron/megatron_golden_values_resume_2nd_half_nan_placeholders.json",
        [(5, 299947, 514054), (13, 84593, 944495)],
    ),  # a 5,000-digit step key
    (
        "chronicle",
        "fixtures/chronicle/logbook_entries.txt",
        [(8, 843124, 560883), (8, 365555, 833978), (10, 936421, 146952)],
    ),  # a 87 kB line: restart words looked back over all of it
    (
        "hf-trainer-log",
        "fixtures/text/hf_dicts_logging_steps.log",
        [(6, 675252, 788710), (13, 3680, 755716), (6, 855679, 586602)],
    ),  # a loss of 1e300: exp of the ratio
    (
        "hf-trainer-table",
        "fixtures/real/hf_trainer/wav2vec2_tr_model_card_no_log_repeated_train_loss.log",
        [(13, 795167, 310865)],
    ),  # a duplicated row: record and event
    (
        "hf-trainer-table",
        "fixtures/real/hf_trainer/wav2vec2_tr_model_card_no_log_repeated_train_loss.log",
        [(5, 169912, 419363), (7, 825814, 40425), (7, 633405, 406560)],
    ),  # an inf step
    (
        "hf-trainer-table",
        "fixtures/real/hf_trainer/wav2vec2_tr_model_card_no_log_repeated_train_loss.log",
        [(6, 449301, 250892), (0, 518762, 831794)],
    ),  # a step beyond int64
    (
        "hf-trainer-table",
        "fixtures/real/hf_trainer/wav2vec2_tr_model_card_no_log_repeated_train_loss.log",
        [(6, 624669, 734651), (11, 49912, 445845)],
    ),  # a 250-digit step
    (
        "lightning-csv",
        "fixtures/lightning/metrics.csv",
        [(2, 574986, 599096), (5, 507292, 944801), (13, 582257, 357773)],
    ),  # a NaN step
    (
        "megatron",
        "fixtures/real/megatron/mds_pr434_single_line_nan_hidden.log",
        [(1, 776392, 403437), (8, 742223, 348744)],
    ),  # a layout with no fields
    (
        "metaseq",
        "fixtures/metaseq/wrapped_glued.log",
        [(6, 562504, 591392), (5, 930741, 798163), (8, 607860, 475263)],
    ),  # year 0 (metaseq stamp)
    (
        "wandb",
        "fixtures/wandb/chart_two_runs.csv",
        [(3, 281006, 26226), (8, 470743, 155345)],
    ),  # a header repeated 5,000 times
    (
        "metaseq",
        "fixtures/metaseq/corpus_pr309_actv_norm.log",
        [(5, 90931, 346877), (5, 410541, 410610)],
    ),  # no record with a step, a float column: nonfinite's check of nothing
    (
        "hf-trainer",
        "fixtures/hf_trainer/rewind/checkpoint-4/trainer_state.json",
        [(5, 95824, 579206)],
    ),  # an evaluation entry whose step is infinite
    (
        "lightning-bar",
        "fixtures/real/lightning/automm_fp16_nan_loss_glued_ckpt.log",
        [(8, 75, 1)],
    ),  # a bar line printed twice onto itself: one line, not a record and a copy
    (
        "chronicle",
        "fixtures/chronicle/excerpt.md",
        [(12, 790525, 250416), (8, 375882, 411787)],
    ),  # the document repeated 1,788 times: each pasted excerpt read once
]


@pytest.mark.parametrize(("fmt", "path", "ops"), FOUND, ids=lambda x: str(x)[:40])
def test_mutations_found_before_keep_every_invariant(fmt, path, ops, tmp_path):
    assert run_case(fmt, path, ops, tmp_path) == []
