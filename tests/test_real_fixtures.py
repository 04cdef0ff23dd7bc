"""Real training output collected from public issues, READMEs and repositories
(``fixtures/real/<framework>/``), each with hand labels written by reading it
(``<name>.labels.json``): the records, first and last step every input reads to, and
the labelled incidents the run's events and findings show."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import parsers
from bench._real_labels import LABELS, SHOWN_BY, crash_shown, input_of, key_of, shown
from logbook.detectors import detect
from logbook.errors import InputError

# Excerpts not read to their labels yet, and why. The test below fails when one of
# them starts reading right (take it off the list) or another stops.
KNOWN_GAPS = {
    "text/espnet_issue5633_quoted_asr2_epoch1": "batch ranges within epochs",
    "text/icefall_pr314_epoch_boundary_checkpoint": (
        "a batch counter from 0 across an epoch boundary, no epoch length printed"
    ),
    "text/t2tvit_issue26_timm_summary_csv_rows_nan_from_epoch209_inline_backticks": (
        "rows of a CSV without its header"
    ),
    "nanogpt/modded_npu_llmc_baseline_two_step_numberings_off_by_one": "two step numberings",
    "hf_trainer/llamafactory_trainer_log_two_writers_interleaved_resume_ckpt5000": (
        "two writers interleaved in one file"
    ),
    "nemo/neuronx_nemo1_flattened_bar_ptl_loss_nan": "a cut record's step is its bar's, not +1",
    "hf_trainer/malaysia_ai_ray_8gpu_resume_ckpt500_dicts_per_node": "workers' bars out of order",
    "fairseq/fairseq_issue247_tqdm_per_gpu_unordered": "per-GPU tqdm bars out of order",
    "hf_trainer/nbbert_seqlabel_flattened_bars_log_history": "a printed log_history list",
    "text/espnet_issue2674_lm_epoch_boundary_batch_ranges": "batch ranges within epochs",
    "hf_trainer/llamafactory_issue5660_bf16_then_fp16_two_runs_grad_norm_nan": "two runs unmarked",
    "hf_trainer/malaysia_ai_ray_gpt2_resume_ckpt200_after_s3_timeout": "bar steps of two workers",
    "hf_trainer/transformers_issue9415_two_ranks_prefixed_dicts_differ": "ranks' prints differ",
    "hf_trainer/trl_dapo_grpo_run_terminal_cr_bars_custom_nan_warnings": "redraws amid dicts",
    "text/trace_issue5_epoch_step_loss_in_tqdm_desc_repeats_each_epoch": "epochs out of order",
    "fairseq/fairseq_lua_issue26_blstm_epoch_jumps_20_to_100": "fairseq-lua's layout",
    "deepspeed/ds_issue697_2021_grad_overflow_two_line_msg_scale_stuck_at_1": (
        "DeepSpeed's throughput-only timer lines"
    ),
    "text/rtm3d_issue4_two_line_records_epoch127": "where ``[e/E]`` counts from",
    "deepspeed/ds_tutorial_cifar10_2020_worker0_prefix_timer_lines_one_loss_print": (
        "DeepSpeed 2020's timer lines and ``[2, 12000] loss:``"
    ),
    "maxtext/xpk_large_scale_guide_commented_pdt_timestamp_lines_elided": "a log in comments",
    "text/grpo_gemma2_lora_unnumbered_loss_lines_with_eval_text_step_headings": (
        "lines without a step among records with one"
    ),
    "text/grpo_unnumbered_steps_epoch_boundary": "lines without a step among records with one",
    "text/grpo_ppo_gemma2_epoch_boundary": "a step's line and its running mean's line",
    "text/dpo_gemma2_last_epochs": "an epoch's mean line among its steps' lines",
    "lightning/uvadlc_gdl_lightning_bar_v_num_val_acc_no_loss": "a bar with no loss",
    "text/unsloth_issue1140_two_launches_banners_no_loss": "banners and bars, no record",
    "megatron/mcore_stock_dp4ep4_interleaved_titan_step_lines": (
        "two loggers' records of one step, in either order"
    ),
    "text/mnist_cpu_vs_mps_two_runs_bracket_epoch_batch": (
        "labelled 1..30 (no epoch length printed); read (epoch - 1) x 900 + batch"
    ),
    "text/learning_to_see_in_dark_issue117_epoch_iter_loss_nan_counter_reset": (
        "two bare counters, epoch and batch"
    ),
    "lightning/stanton_pl_regression_lr_finder_negative_its_esc_a": (
        "a bar redrawn at 0% of each epoch repeats the last epoch's loss"
    ),
    "hf_trainer/chinese_vicuna_issue147_33b_dicts_eval_bar_glued_rich_traceback_box": (
        "labelled 1..2 (no step printed); read at the one bar position printed after both"
    ),
    "metric_logger/salmonn_lavis_runner_md_epoch1_rank3_dataloader_crash": (
        "an in-epoch counter across two epochs in markdown blocks, the epochs apart"
    ),
    "text/kohya_sd_scripts_issue2137_epoch_end_bars_avr_loss_nan_rich_info_lines": (
        "each epoch's bar at its end only, its position counted over the epochs twice"
    ),
    "dllogger/tacotron2_adapted_waveglow_nvlog_v0_negative_nll_loss_one_epoch": (
        "DLLogger's first layout: one JSON object of per-epoch lists"
    ),
    "text/sockeye_issue154_v1_7_mxnet_speedometer_perplexity_only_tabs": (
        "perplexity only, behind a stamp of colons (``[2017-09-26:07:44:49:INFO:...]``)"
    ),
    "hf_trainer/lora_alpaca_record_log_logger_prefixed_dicts_3_epochs": (
        "labelled 1..121; read x10 from the logging_steps the cut's note names"
    ),
}


@functools.cache
def _runs(label: Path) -> tuple[list, str]:
    """The runs read from one excerpt (read once for all the tests), or the error."""
    try:
        return parsers.read_logs(input_of(label)), ""
    except InputError as exc:
        return [], str(exc)


@functools.cache
def _reads_right(label: Path) -> tuple[bool, tuple, tuple]:
    want = json.loads(label.read_text())
    runs, error = _runs(label)
    if error:
        return False, (error,), ()
    # records in file order; a line that holds records of several runs (a W&B export's
    # row) counts once
    rows: dict[int, list] = {}
    for r in runs:
        mine: dict[int, list] = {}
        for line, step in r.metrics.select("line", "step").iter_rows():
            mine.setdefault(line, []).append(step)
        for line, steps in mine.items():
            if len(steps) > len(rows.get(line, [])):
                rows[line] = steps
    steps = [s for line in sorted(rows) for s in rows[line]]
    got = (len(steps), steps[0] if steps else None, steps[-1] if steps else None)
    exp = (want["records"], want["first_step"], want["last_step"])
    # the count within one (a last record cut mid-line, read or not), the first step
    # exact, and the last one too unless the cut record is the one missing
    near = abs(got[0] - exp[0]) <= 1 and got[1] == exp[1]
    return near and (got[2] == exp[2] or got[0] == exp[0] - 1), got, exp


@pytest.mark.parametrize("label", LABELS, ids=key_of)
def test_every_excerpt_has_its_source_and_labels(label):
    first = input_of(label).read_text(errors="replace").splitlines()[0]
    want = json.loads(label.read_text())
    assert first.startswith("# source: ")
    assert {"framework", "records", "first_step", "last_step"} <= set(want)
    assert want["framework"] == label.parent.name


@pytest.mark.parametrize("label", [x for x in LABELS if key_of(x) not in KNOWN_GAPS], ids=key_of)
def test_excerpt_reads_to_its_labels(label):
    ok, got, exp = _reads_right(label)
    assert ok, (got, exp)


def test_the_known_gaps_are_exactly_the_excerpts_not_read_right():
    wrong = {key_of(x) for x in LABELS if not _reads_right(x)[0]}
    assert wrong == set(KNOWN_GAPS)


def test_at_least_sixty_excerpts_of_fifteen_frameworks_three_each():
    frameworks = {x.parent.name for x in LABELS}
    counts = {f: sum(x.parent.name == f for x in LABELS) for f in frameworks}
    assert len(LABELS) >= 60 and len(frameworks) >= 15
    assert min(counts.values()) >= 3, counts


@functools.cache
def _events(label: Path) -> tuple:
    """Every event and finding of the runs of one excerpt (read and detected once)."""
    runs, _ = _runs(label)
    return tuple(e for r in runs for e in [*r.events, *detect(r)])


def test_nine_in_ten_labelled_incidents_are_events_or_findings():
    seen = total = 0
    for label in LABELS:
        want = json.loads(label.read_text())
        events = list(_events(label))
        for key, kinds in SHOWN_BY.items():
            for step in want.get(key) or []:
                total += 1
                seen += shown(step, kinds, events)
    assert total >= 80
    assert seen / total >= 0.9, (seen, total)


# Excerpts labelled with a crash that no crash finding (or restart cause) shows, and why.
CRASH_MISSES = {
    "detectron2/d2_214_2019_format_stops_at_790": "the exception itself is not in the paste",
    "hf_trainer/malaysia_ai_ray_gpt2_resume_ckpt200_after_s3_timeout": "workers' bars out of order",
}


def test_labelled_crashes_are_findings():
    crashed = [x for x in LABELS if json.loads(x.read_text()).get("crash")]
    missed = {key_of(x) for x in crashed if not crash_shown([*_events(x)])}
    assert len(crashed) >= 15
    assert missed == set(CRASH_MISSES)
