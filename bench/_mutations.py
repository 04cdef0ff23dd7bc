"""Mutations of real and synthetic fixtures, the way log files go bad: used by the fuzz
test (``tests/test_fuzz.py``) and its long profile (``bench/fuzz.py``).

A mutation is a list of ``(op, a, b)`` triples of small integers applied in order to the
bytes of a fixture; the integers pick places and values, so a mutation is cheap to draw,
to print and to shrink.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Seed inputs of each format: small fixtures (a mutation of a large one only costs time).
SEEDS: dict[str, tuple[str, ...]] = {
    "megatron": (
        "fixtures/megatron/spike_restart.log",
        "fixtures/real/megatron/mds_pr434_single_line_nan_hidden.log",
        "fixtures/real/megatron/bigscience_16gb_nodes_hard_wrapped_value_split.log",
    ),
    "metaseq": (
        "fixtures/metaseq/wrapped_glued.log",
        "fixtures/metaseq/legacy_bare_json.log",
        "fixtures/metaseq/corpus_pr309_actv_norm.log",
    ),
    "fairseq-simple": (
        "fixtures/real/fairseq/fairseq_issue2584_two_line_paste_no_timestamp.log",
        "fixtures/real/fairseq/fairseq_issue1678_huge_loss_overflow_keyerror_crash.log",
    ),
    "jsonl": ("fixtures/jsonl/messy_crlf.jsonl", "fixtures/detect/healthy.expected.jsonl"),
    "logbook": ("fixtures/text/two_runs.expected.jsonl",),
    "chronicle": ("fixtures/chronicle/excerpt.md", "fixtures/chronicle/logbook_entries.txt"),
    "hf-trainer": ("fixtures/hf_trainer/rewind/checkpoint-4/trainer_state.json",),
    "tensorboard": (
        "fixtures/tensorboard/tbx_add_scalars/loss/train/events.out.tfevents.1796035087.vm",
    ),
    "wandb": ("fixtures/wandb/runs_table.csv", "fixtures/wandb/chart_two_runs.csv"),
    "nanogpt": (
        "fixtures/nanogpt/shakespeare_char.log",
        "fixtures/real/nanogpt/issue210_finetune_config_echo_nan_iter1.log",
    ),
    "torchtitan": (
        "fixtures/real/torchtitan/pr1884_interleaved_ranks_cp.log",
        "fixtures/real/torchtitan/pr3393_grad_norm_padded_memory.log",
    ),
    "lightning-csv": ("fixtures/lightning/metrics.csv",),
    "lightning-bar": (
        "fixtures/real/lightning/automm_fp16_nan_loss_glued_ckpt.log",
        "fixtures/real/lightning/pl_issue4225_tqdm_newline_bars.log",
    ),
    "nemo": ("fixtures/real/nemo/qwen3_30b_nemo2_srun_rank_prefix.log",),
    "mmengine": ("fixtures/real/mmengine/mmdet_11893_single_line_all_nan.log",),
    "dllogger": ("fixtures/real/dllogger/dle_bert_squad_1107_training_iteration_global.log",),
    "metric-logger": ("fixtures/real/metric_logger/deit_76_mpirun_timestamp_rank_prefix.log",),
    "olmo": ("fixtures/text/olmo_multiline.log",),
    "composer": ("fixtures/real/composer/llmfoundry_readme_mpt125m_first_four_batches.log",),
    "mlx-lm": ("fixtures/real/mlx_lm/mlx_examples_issue620_loss_blowup.log",),
    "llama2c": ("fixtures/real/llama2c/modded_llama2_pr9_lr_decay_evals.log",),
    "modded-nanogpt": ("fixtures/real/nanogpt/modded_2025_step_lines_without_loss_val_at_250.log",),
    "hf-trainer-log": ("fixtures/text/hf_dicts_logging_steps.log",),
    "hf-trainer-table": (
        "fixtures/real/hf_trainer/wav2vec2_tr_model_card_no_log_repeated_train_loss.log",
    ),
    "megatron-golden": (
        "fixtures/real/megatron/megatron_golden_values_resume_2nd_half_nan_placeholders.json",
    ),
    "nanogpt-logtxt": (
        "fixtures/real/nanogpt/build_nanogpt_logtxt_step_stream_value_stopped_at_94.log",
    ),
    "deepspeed": ("fixtures/real/deepspeed/ds_chat_rm_opt350m_grad_overflow_per_rank.log",),
    "csv": ("fixtures/real/csv/yolov5_results_csv_space_padded_columns.csv",),
    "epoch-table": (
        "fixtures/real/text/tsai_issue639_fastai_fit_one_cycle_tab_table_nan_keyboardinterrupt.log",
        "fixtures/real/text/ultralytics_issue21765_yolov8_negative_box_loss_epochs7_9.log",
    ),
    "darknet": (
        "fixtures/real/text/darknet_alexeyab_issue5836_resume_from_save_point_rate_zero_then_minus_nan_avg_loss.log",
    ),
    "kv-table": (
        "fixtures/real/text/guided_diffusion_issue50_imagenet128_fp16_dumpkvs_table_all_nan_sci_notation_step_lg_loss_scale_decreasing.log",
    ),
    "kv-blocks": (
        "fixtures/real/text/isaaclab_issue5084_rsl_rl_right_aligned_iteration_blocks_hash_rulers_chunk_mid_block.log",
        "fixtures/real/text/coqui_vits_finetune_trainer_0_log_restore_step_1000000_partial_init_ansi_bold_amp_scaler_halved.log",
    ),
    "yolo-results": (
        "fixtures/real/text/yolov5_face_results_txt_headerless_five_losses_landmark_30_epochs.txt",
        "fixtures/real/text/soccer_yolov7_results_txt_headerless_55_epochs_cls_zero_single_class.txt",
    ),
    "cyclegan": (
        "fixtures/real/text/cyclegan_horse2zebra_loss_log_crlf_resume_epoch60_rerun_empty_launch_headers.log",
        "fixtures/real/text/pix2pix_issue1260_epoch355_d_real_d_fake_zero_discriminator_collapse_g_gan_high.log",
    ),
    "sacred": (
        "fixtures/real/text/tgne_sacred_filestorage_metrics_json_parallel_arrays_four_metrics_100_steps.json",
    ),
    "mlflow": (
        "fixtures/real/text/swahili_stt_mlflow_file_store_metric_file_keras_ctc_loss_plateau_epoch_steps.txt",
    ),
    "text": ("fixtures/text/unknown_line.log", "fixtures/text/two_runs.log"),
}

# Values a bad or odd token becomes.
ODD_TOKENS = (
    b"nan",
    b"NaN",
    b"-inf",
    b"inf",
    b"Infinity",
    b"1e309",
    b"-1e309",
    b".",
    b"-",
    b"",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1" * 5000,
    b"1" * 40,
    b"-7.77e-301",
    b"0x1F",
    "\u0661\u0662\u0663".encode(),
    "\uff11\uff12".encode(),
    b"1,234,567",
    b"1.2.3",
    b"1e-400",
    b"-0",
    b"00000000000000000012",
    b"1_000",
    b"2023-13-14",
    b"2023-02-30",
    b"-0001-01-01",
    b"99999-01-01",
    b"null",
    b"None",
    b"true",
    b"[]",
    b"{}",
    b'"',
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"<script>alert(1)</script>",
)
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
N_OPS = 14


def mutate(data: bytes, ops: list[tuple[int, int, int]]) -> bytes:
    """``data`` with each ``(op, a, b)`` applied in turn (see :data:`N_OPS`)."""
    for op, a, b in ops:
        data = _apply(data, op % N_OPS, a, b)
    return data


def _apply(data: bytes, op: int, a: int, b: int) -> bytes:
    lines = data.split(b"\n")
    n = len(lines)
    i = a % n if n else 0
    if op == 0:  # flip one byte
        if not data:
            return data
        k = (a * 7919 + b) % len(data)
        return data[:k] + bytes([data[k] ^ (1 << (b % 8))]) + data[k + 1 :]
    if op == 1:  # truncate anywhere
        return data[: (a * 7919 + b) % (len(data) + 1)]
    if op == 2:  # delete a line
        return b"\n".join(lines[:i] + lines[i + 1 :])
    if op == 3:  # duplicate a line
        return b"\n".join(lines[: i + 1] + lines[i:])
    if op == 4:  # swap two lines (steps go backwards)
        j = b % n if n else 0
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if op == 5:  # a number becomes an odd token
        return _number(data, a, lambda _m: ODD_TOKENS[b % len(ODD_TOKENS)])
    if op == 6:  # a number becomes huge, negative or tiny
        scale = (b"0" * (b % 25), b"-", b"e-" + str(b % 400).encode(), b"e" + str(b % 400).encode())
        pick = scale[b % 4]
        return _number(data, a, lambda m: pick + m if pick == b"-" else m + pick)
    if op == 7:  # a value left empty (the text after a ':' or '=' up to a separator)
        k = _nth(data, rb"[:=]\s*[^\s|,}]+", a)
        if k is None:
            return data
        start, end = k
        return data[: start + 1] + data[end:]
    if op == 8:  # a very long line
        long = (lines[i] if n else b"x") * (1 + b % 2000)
        return b"\n".join(lines[:i] + [long[:1_000_000]] + lines[i + 1 :])
    if op == 9:  # NUL bytes
        k = (a * 7919) % (len(data) + 1)
        return data[:k] + b"\x00" * (1 + b % 64) + data[k:]
    if op == 10:  # a byte-order mark, at the start or inside
        bom = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")[b % 3]
        return (
            bom + data if a % 2 == 0 else b"\n".join(lines[:i] + [bom + lines[i]] + lines[i + 1 :])
        )
    if op == 11:  # another encoding: Latin-1 or UTF-16 bytes on one line
        enc = ("latin-1", "utf-16-le", "cp1252")[b % 3]
        text = lines[i].decode("utf-8", "replace") + " caf\u00e9 \u00b5s" if n else "x"
        return b"\n".join(lines[:i] + [text.encode(enc, "replace")] + lines[i + 1 :])
    if op == 12:  # line endings: all CR, all CRLF, or mixed
        kind = b % 3
        if kind == 0:
            return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")
        if kind == 1:
            return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        return b"".join(ln + (b"\r", b"\r\n", b"\n")[(a + k) % 3] for k, ln in enumerate(lines))
    # 13: a block of lines repeated (a pasted excerpt, an appended second job)
    j = min(n, i + 1 + b % 40)
    return b"\n".join(lines[:j] + lines[i:j] + lines[j:])


def _nth(data: bytes, pattern: bytes, a: int) -> tuple[int, int] | None:
    hits = [m.span() for m in re.finditer(pattern, data[:200_000])]
    return hits[a % len(hits)] if hits else None


def _number(data: bytes, a: int, new) -> bytes:
    hits = list(_NUMBER.finditer(data[:200_000]))
    if not hits:
        return data
    m = hits[a % len(hits)]
    return data[: m.start()] + new(m.group()) + data[m.end() :]


def seed_bytes(path: str) -> bytes:
    return (ROOT / path).read_bytes()


# --- one fuzz case: a mutated input through ``parse -o`` and ``detect --json`` --------

TIME_LIMIT_S = 10.0  # for inputs of at most 1 MB
_ACCOUNTING = re.compile(
    r"^(?P<file>.+?)(?: \(from line [\d,]+\))?: (?P<lines>[\d,]+) lines = (?P<r>[\d,]+) record"
    r" \+ (?P<e>[\d,]+) event \+ (?P<c>[\d,]+) continuation \+ (?P<i>[\d,]+) ignored"
    r" \+ (?P<u>[\d,]+) unrecognized"
)


class Hang(Exception):
    pass


def run_case(fmt: str, path: str, ops: list[tuple[int, int, int]], work: Path) -> list[str]:
    """The invariants ``data`` breaks (empty: none) when the mutation ``ops`` of the seed
    ``path`` (of format ``fmt``) goes through ``logbook parse -o`` and ``logbook detect
    --json``: exit 0, 1 or 2 only; no internal error; a one-line message on exit 2; within
    :data:`TIME_LIMIT_S`; every line accounted for once in the parse summary."""
    data = mutate(seed_bytes(path), ops)
    work.mkdir(parents=True, exist_ok=True)
    name = Path(path).name
    if fmt == "hf-trainer":  # a trainer_state.json is read from its folder as well
        name = "trainer_state.json"
    target = work / name
    target.write_bytes(data)
    out = work / ("out.parquet" if sum(op for op, _, _ in ops) % 2 else "out.jsonl")
    problems: list[str] = []
    for argv in (["parse", str(target), "-o", str(out)], ["detect", "--json", str(target)]):
        code, stdout, stderr, took = _invoke(argv, TIME_LIMIT_S * 3)
        label = f"{argv[0]}: "
        if code == "hang":
            problems.append(label + f"hang (> {TIME_LIMIT_S * 3:.0f} s)")
            continue
        if code not in (0, 1, 2):
            problems.append(label + f"exit {code}")
        if "internal error" in stderr or "Traceback" in stderr:
            problems.append(label + stderr.strip().splitlines()[-1][:300])
        elif code == 2 and len(stderr.strip().splitlines()) != 1:
            problems.append(label + f"exit 2 with {len(stderr.strip().splitlines())} lines")
        if len(data) <= 1_000_000 and took > TIME_LIMIT_S:
            problems.append(label + f"took {took:.1f} s")
        # (a logbook file carries the line counts of the log it was parsed from)
        if argv[0] == "parse" and code == 0 and fmt != "logbook":
            problems += _accounting_problems(stdout)
    return problems


def _accounting_problems(stdout: str) -> list[str]:
    out = []
    found = 0
    for line in stdout.splitlines():
        m = _ACCOUNTING.match(line)
        if m is None:
            continue
        found += 1
        n = {k: int(v.replace(",", "")) for k, v in m.groupdict().items() if k != "file"}
        parts = n["r"] + n["e"] + n["c"] + n["i"] + n["u"]
        if parts != n["lines"]:
            out.append(f"parse: accounting {parts} != {n['lines']} lines")
        if "counted twice" in line:
            out.append("parse: " + line[line.index("; ") + 2 :])
    if not found and "records" in stdout:
        out.append("parse: no line accounting printed")
    return out


def _invoke(argv: list[str], limit: float) -> tuple[int | str, str, str, float]:
    """``logbook ARGV`` in this process: (exit code or "hang", stdout, stderr, seconds)."""
    import contextlib
    import io
    import signal
    import sys
    import time

    from logbook import cli

    def alarm(_sig, _frame):
        raise Hang

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["logbook", *argv]
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
                code: int | str = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Hang:
        code = "hang"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        sys.argv = saved
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0
