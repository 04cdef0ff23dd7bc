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
    "dllogger/nv_rigl_imagenet_raport_json_dllogger_epoch_iter_steps_split_lines": "one interval's values on two DLLL lines of one step",  # noqa: E501
    "csv/laohur_contexttransformer_log_train_log_appended_relaunches_auto_resume": "a CSV whose header comes again at each launch appended",  # noqa: E501
    "text/pix2pix_sketch2face_cuhk_loss_log_empty_first_launch_88_image_epochs_no_epoch_9_print": "epochs shorter than the print interval: one print an epoch, their length not read",  # noqa: E501
    "text/tianshi_xu_assignment5_rl_grpo_clip_offpolicy_log_appended_launches_collapse": "a loss line without its step, the step on the rollout line before it",  # noqa: E501
    "text/unsloth_issue1145_unsloth_train_bar_glued_step_comma_loss": "unsloth_train's ``step, loss`` glued after a bar: two numbers, no key",  # noqa: E501
    "lightning/anemoi_core_issue614_lightning_bar_epoch_rollover_hex_v_num_metrics_elided": "a bar whose values were elided (``v_num=35a4, ...``): no value",  # noqa: E501
    "text/sgiformer_issue4_pointcept_hook_logger_isolated_nan_epoch18": "Pointcept's ``Train: [18/170]`` counts epochs from 1, Swin's ``[14/300]`` from 0",  # noqa: E501
    "text/ultralytics_issue19357_yolo_log_with_line_numbers_patched_fitness_print": "a paste with its editor's line numbers before every line",  # noqa: E501
    "text/mindocr_issue670_svtr_tiny_callbacks_epoch12_noisy_ctc_loss_line_cut": "one epoch of ``epoch: [12/20] step: [700/4468]``: read within the epoch",  # noqa: E501
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
    "hf_trainer/llamafactory_issue5660_bf16_then_fp16_two_runs_grad_norm_nan": "two runs unmarked",
    "hf_trainer/malaysia_ai_ray_gpt2_resume_ckpt200_after_s3_timeout": "bar steps of two workers",
    "hf_trainer/transformers_issue9415_two_ranks_prefixed_dicts_differ": "ranks' prints differ",
    "hf_trainer/trl_dapo_grpo_run_terminal_cr_bars_custom_nan_warnings": "redraws amid dicts",
    "fairseq/fairseq_lua_issue26_blstm_epoch_jumps_20_to_100": "fairseq-lua's layout",
    "deepspeed/ds_issue697_2021_grad_overflow_two_line_msg_scale_stuck_at_1": (
        "DeepSpeed's throughput-only timer lines"
    ),
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
    "fairseq/fairseq_issue1529_wav2vec2_ft_fp32_json_epoch_summary_hard_wrapped_loss_nan": (
        "an epoch summary JSON hard-wrapped mid-key and mid-value, the only record"
    ),
    "text/aichipbench_sd_train_text_to_image_two_runs_accum_postfix_redraws_caret_m_glued_bars": (
        "gradient-accumulation redraws of one step and a run of bars glued by a literal ^M"
    ),
    "text/icefall_issue1382_hubert_rnnt_lines_doubled_by_fairseq_root_logger_two_formats": (
        "each rank's record printed again in a second logger's format"
    ),
    "text/yolov5_issue6907_azure_iso_timestamps_per_batch_redraws_nan_mid_epoch49_cut": (
        "headless YOLOv5 batch redraws: no header names the columns"
    ),
    "csv/rl_racer_sb3_ppo_progress_csv_eval_callback_rows_steal_train_values_empty_cells": (
        "rollout rows without the loss are records here, not in the labels"
    ),
    "csv/sac_project_custom_sac_sb3_logger_progress_csv_two_dump_sites_no_step_column": (
        "two dump sites with two counters and no step column"
    ),
    "hf_trainer/hongbomiao_pr37684_trl_ppo_trainer_v2_dicts_episode_counter_no_loss_key_epoch_past_1": (  # noqa: E501
        "TRL's PPO v2 dicts: an episode counter, no loss key"
    ),
    "hf_trainer/vllm_ascend_issue116_openr1_grpo_npu_one_dict_then_copy_d2d_crash_glued_to_bar": (
        "one dict before the bar's first position, alone"
    ),
    "text/cntk_e2e_speech_dnn_parallel_mpi_rank0_prefix_minibatch_ranges_grow_per_epoch": (
        "CNTK's minibatch ranges of epochs of other lengths"
    ),
    "text/cntk_issue406_windows_qnan_loss_second_minibatch_range_call_stack_exception": (
        "CNTK's minibatch ranges and 1.#QNAN000"
    ),
    "text/dpo_reference_issue89_train_stats_all_nan_terminal_wrap_debris_in_keys": (
        "an examples counter, keys broken by terminal wraps"
    ),
    "text/monai_tutorials_issue72_ignite_epoch_iter_record_dataloader_killed_traceback": (
        "one record of an epoch's iteration of its total: no other epoch to count from"
    ),
    "text/openrlhf_issue1050_ray_actor_train_epoch_bar_postfix_metrics_redraw_pairs_then_oom_traceback": (  # noqa: E501
        "a replay buffer's bar per epoch, redrawn in pairs"
    ),
    "text/openrlhf_issue95_openllama2_ppo_traceback_overwrites_bar_leaving_postfix_tail_oom": (
        "a bar's postfix left behind a traceback that overwrote it"
    ),
    "text/rvc_webui_issue507_three_line_records_step_lr_list_loss_kl_saturates_at_9": (
        "records of three lines, values in a list"
    ),
    "text/so_vits_svc_dodo_32k_tab_separated_list_losses_aborted_launches_resume_g6000": (
        "unnamed values in a list, an epoch named iteration"
    ),
    "hf_trainer/fate_hetero_nn_tutorial_two_party_ranks_rich_log_dual_dict_lines_host_loss_zero": (
        "two parties' dicts, each printed twice, the second with its step"
    ),
    "text/gluonts_issue833_deepar_tqdm_epoch_1based_vs_logger_epoch_0based": (
        "a bar's epoch of its total beside the logger's epoch, one apart"
    ),
    "text/lerobot_blog_act_so100_train_log_step_rounded_1K_repeats_three_times": (
        "steps printed rounded to thousands (1K three times)"
    ),
    "text/peft_examples_prefix_tuning_clm_notebook_epoch_tensor_repr_sci_ppl_glued_last_bar": (
        "epoch lines read as summaries beside the one glued onto a bar"
    ),
    "text/recbole_mbht_issue9_hash_tqdm_ncols100_gpu_ram_postfix_epoch_training_lines": (
        "RecBole's epoch lines between ASCII bars"
    ),
    "text/rlblox_pr53_cleanrl_style_sac_global_step_episodic_return_and_tb_style_loss_lines": (
        "episode lines and loss groups with the step at the end"
    ),
    "text/styletts2_issue347_first_stage_tail_then_second_stage_nan_epoch47_step_goes_back_20_to_10": (  # noqa: E501
        "epoch and step of steps per epoch, two stages pasted with prose between"
    ),
    "text/swav_issue12_create_logger_elapsed_day_prefix_epoch163_loss_stuck_8": (
        "an elapsed time with a comma in its prefix"
    ),
    "hf_trainer/firefly_issue210_qlora_dicts_glued_to_two_collapsed_tqdm_redraws_constant_lr": (
        "dicts glued onto two redraws merged on one line"
    ),
    "text/flair_b659_training_log_duplicated_lines_appended_aborted_launches": (
        "Flair's epochs counted from 1 where an excerpt shows no first epoch"
    ),
    "text/flair_issue2081_epoch49_reduce_lr_on_plateau_print": (
        "one epoch of Flair's: its iterations of the epoch's total not counted over epochs"
    ),
    "text/flair_issue3028_epoch6_linear_lr_decay_bad_epochs": (
        "one epoch of Flair's: its iterations of the epoch's total not counted over epochs"
    ),
    "text/gpt2_chinese_tf2_issue2_tqdm_glued_nan_loss": (
        "records glued onto a bar whose total gives the epoch's length"
    ),
    "metric_logger/salmonn_lavis_attempt10_md_grad_norm_inf_in_epoch_averages": (
        "epoch blocks pasted in markdown, each showing its own last step"
    ),
    "nanogpt/dlrover_nanogpt_tutorial_two_workers_two_settings_kubectl_logs": "two workers' copies of two runs, read as four runs",  # noqa: E501
    "text/colossalai_issue4551_llama2_benchmark_rich_wrapped_log_glued_tqdm": "a bar's position and a rich log line wrapped at 80 columns",  # noqa: E501
    "text/megatron_lm_dialog_ctrl_ner_train_log_nine_launches_interleaved_runs": "nine launches of three runs interleaved, their epochs counted from 0",  # noqa: E501
    "text/veomni_pr269_npu_fused_moe_tqdm_postfix_loss_grad_norm": "each step drawn twice, its postfix on the next step's bar",  # noqa: E501
    "text/acme_issue269_impala_absl_terminal_logger_learner_actor_evaluator_pipe_lines_cut": "three loggers sharing their counters; the learner's lines are the records",  # noqa: E501
    "text/auxiliaryasr_issue7_epoch_blocks_bare_nan_prints_glued_to_tqdm_bars_cut": "epoch blocks of key: value lines behind bars with bare prints glued on",  # noqa: E501
    "text/coqui_tts_issue2070_vits_resume_global_step_370050_block_records_amp_scaler_64_space_only_lines_cut": "labelled from the print interval; read one step before the first header",  # noqa: E501
    "text/dotaclient_issue34_kubectl_logs_resume_from_model_18_iteration_19_epoch_sublines_cut": "an iteration header and per-epoch sub-lines",  # noqa: E501
    "text/dotaclient_issue42_iteration_27_epoch3_valueerror_loss_nan_traceback": "an iteration header and per-epoch sub-lines",  # noqa: E501
    "text/dreamer_v1_issue58_bracket_step_slash_fields_grad_norm_nan_loss_inf_30_digit_losses_cut": "a bracketed step read as a rank tag",  # noqa: E501
    "text/kaldi_issue134_nnet3_train_objf_minibatch_ranges_email_hard_wrapped_cut": "Kaldi's objective lines hard-wrapped in three",  # noqa: E501
    "text/kerasrl_pr80_sarsa_train_episode_logger_lines_numbered_list_prefix_cut": "a markdown list's numbers before the step",  # noqa: E501
    "text/rtvc_issue126_wavernn_vocoder_epoch_summaries_step_in_k_dot_elision": "steps printed in thousands (``86k``)",  # noqa: E501
    "text/sb3_zoo_pr521_ppo_table_chunk_starts_mid_table_eval_line_cut": "a table cut above its step, labelled from the stride",  # noqa: E501
    "text/tisv_ge2e_two_line_records_wrong_ordinal_th_checkpoint_line_last_step_header_no_newline": "records of two lines, the step as an ordinal (``57957th``)",  # noqa: E501
    "text/vits_chinese_issue2_bare_list_losses_step_lr_nan_inf_every_record": "unnamed values in a list",  # noqa: E501
    "lightning/latent_diffusion_issue8_pl1_bar_cut_at_width_glued_to_average_epoch_time_not_in_top3": "bars cut at the terminal's width: the global step behind the cut",  # noqa: E501
    "metric_logger/sam_hq_issue73_headerless_metriclogger_indented_positions_val_iou_blocks_between_epochs": "positions within epochs of a length the excerpt does not print",  # noqa: E501
    "text/meshmae_issue11_markdown_bold_wrapped_tqdm_epoch_bar_loss_39m_vs_best_2_27": "an epoch's bar in markdown bold: its position read, not the epoch",  # noqa: E501
    "text/monailabel_pr1333_ignite_trainer_evaluator_lines_doubled_epoch_complete_resuming_msg": "Ignite's iteration of the epoch's total, one epoch shown",  # noqa: E501
    "text/nerf_template_issue4_tqdm_desc_loss_lr_no_bar_glyphs_epoch_start_finish_lines": "bars without glyphs, their positions counted over epochs",  # noqa: E501
    "text/pccai_issue1_iter_resets_each_epoch_epoch_1_of_1_then_training_at_epoch_2_total_2": "an iteration counter reset each epoch, the epoch's total changing",  # noqa: E501
    "text/transformer_ssl_moby_issue19_caret_escape_text_records_glued_one_line_apex_overflow_glued": "records glued on one line by a literal escape",  # noqa: E501
    "text/yolov7_issue613_box_total_nan_epochs41_43_val_map_fine_last_bar_two_redraws_one_line": "epoch rows read at their bars' positions",  # noqa: E501
    "deepspeed/trlx_issue342_ppo_tqdm_desc_losses_glued_rollout_bar_deepspeed_overflow": "a rollout bar's position glued before the records",  # noqa: E501
    "text/burn_issue208_mnist_dashboard_snapshot_nan_epoch_batch": "Burn's dashboard, drawn as boxes",  # noqa: E501
    "text/flux_model_zoo_pr7_julia_show_macro_tracked_param_loss_accuracy_pairs": "Julia's ``@show`` pairs, a record over two lines",  # noqa: E501
    "text/keras_rpn_issue2_markdown_bold_wrapped_summary_first_batch_nan": "a Keras bar in markdown bold beside a summary",  # noqa: E501
    "text/monocon_issue20_percent_progress_bar_records_epoch_banner_average_loss_block": "positions given as a percent of the epoch only",  # noqa: E501
    "text/neupy_issue203_markdown_quoted_box_table_epoch_in_e_notation": "a box table quoted in markdown, epochs in e-notation",  # noqa: E501
    "text/radar_detector_issue3_tqdm_epoch_bars_loss_e4_postfix_mean_training_loss_nan": "epoch bars read at their positions, not the epochs",  # noqa: E501
    "text/tinygrad_pr11467_llama3_mlperf_train_padded_redraw_lines_no_step": "values before their keys (``10.5 loss``), no step",  # noqa: E501
    "wandb/wandb_issue2450_console_run_summary_yolov5_right_aligned_keys": "W&B's console run summary",  # noqa: E501
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
        # (an input that holds no record, refused with its reason, lost nothing: a Git
        # LFS pointer committed in place of the log)
        return want["records"] == 0 and "LFS pointer" in error, (error,), ()
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
    "text/nerf_pytorch_issue38_scnerf_train_iter_lines_then_anomaly_stack_and_tqdm_at_209573": (
        "only anomaly mode's stack of the op; the error itself is cut off"
    ),
}


def test_labelled_crashes_are_findings():
    crashed = [x for x in LABELS if json.loads(x.read_text()).get("crash")]
    missed = {key_of(x) for x in crashed if not crash_shown([*_events(x)])}
    assert len(crashed) >= 15
    assert missed == set(CRASH_MISSES)
