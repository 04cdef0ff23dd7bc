"""Event lines every framework prints in some spelling: crashes, resumes, checkpoint
saves, fp16 overflows, configuration echoes. Lines are selected in one vectorized
pass (:data:`ANY`); only the selected lines are read here, one by one."""

from __future__ import annotations

import bisect
import re

from logbook.schema import (
    CheckpointSave,
    ConfigChange,
    EventBase,
    HardwareFailure,
    LrChange,
    Nonfinite,
    OverflowSkip,
    Restart,
    Source,
)

# Crash evidence, most specific first: a crash's cause is the first one found (shared with
# the Megatron reader, which tells exceptions apart itself).
CRASH_CAUSES = [
    ("ecc", r"ECC error|cudaErrorECCUncorrectable|uncorrectable ECC"),
    ("bus_error", r"[Bb]us error"),
    (
        "nccl_timeout",
        r"collective operation timeout|Watchdog caught collective|Some NCCL operations have "
        r"failed or timed out|NCCL\S* .*?(?:timed out|[Tt]imeout)",
    ),
    (
        "oom",
        r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|[Rr]an out of memory"
        r"|Cannot allocate memory|Insufficient Memory|CallbackErrorOutOfMemory"
        r"|[Oo]ut of memory: Killed process|oom-kill|OOM killer",
    ),
    (
        "nccl_error",
        r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError"
        r"|NCCL communicator was aborted",
    ),
    (
        "cuda_error",
        r"CUDA error|CUDAError|cudaError|CUBLAS_STATUS_|CUDNN_STATUS_|illegal memory access"
        r"|device-side assert|NVRM: Xid",
    ),
    ("segfault", r"Segmentation fault|SIGSEGV"),
    (
        "nonfinite_loss",
        r"Loss is (?:nan|inf|-inf|NaN|Inf), stopping training|[Ll]oss (?:became|is) "
        r"(?:infinite|NaN|nan)(?: or NaN)? at iteration"
        r"|Batch \d+: Invalid loss, terminating training"  # Keras' TerminateOnNaN
        r"|Model diverged with loss = NaN"  # TensorFlow's NanTensorHook
        r"|training criterion is not a number \(NAN\)"  # CNTK's stop
        r"|[Ll]oss [Ee]xploded (?:to \S+ )?at step \d"  # keithito's Tacotron
        # LL3DA's loop and its forks: ``Loss in not finite. Terminate training.``
        r"|(?i:loss (?:is|in) (?:not finite|nan|inf)\W{1,3}(?:terminat|stop|abort))",
    ),
    (
        "time_limit",
        r"DUE TO TIME LIMIT|job killed: walltime"
        r"|walltime \d+ exceeded limit|TIME LIMIT EXCEEDED",
    ),
    ("node_failure", r"DUE TO NODE FAIL|NODE_FAIL"),
    # (Slurm's ``error: *** STEP 1942963.1 ON node CANCELLED AT ...``, also cut short)
    ("cancelled", r"CANCELLED AT|Job step aborted|\*\*\* (?:STEP|JOB) \d+(?:\.\d+)? ON\b"),
    ("interrupted", r"^KeyboardInterrupt|\bKeyboardInterrupt: |^\^C\s*$"),
    (
        "abort",
        r"terminating due to uncaught exception|terminate called after throwing"
        r"|Aborted \(core dumped\)|^zsh: abort |^\w+: line \d+: +\d+ Aborted",
    ),
    # (the shell's ``Killed``, on its own line or glued onto a bar it cut short)
    # (also bold in a paste, ``**Killed**``, and a shell's job report: ``run.sh: line 66:
    # 777016 Killed``)
    (
        "sigkill",
        r"SIGKILL|(?:^|[\d\]]|\*\*)Killed(?:\*\*)?[`\s]*$|^[\w./-]+: line \d+: +\d+ Killed\b"
        # DeepSpeed's launcher (``[launch.py:315:sigkill_handler] Killing subprocess N``):
        # a worker is gone, the others are killed
        r"|(?:sigkill_handler\]\s*)?Killing subprocess \d+",
    ),
    ("sigterm", r"SIGTERM|received signal 15"),
    # Megatron's --exit-interval and --exit-duration-in-mins: a checkpoint saved, then out
    ("planned_exit", r"exiting program at iteration \d+|exiting program after [\d.]+ minutes"),
    (
        "process_exit",
        r"[Ee]xited with exit code [1-9]|exits with return code = -?[1-9]|exitcode *: *-?[1-9]"
        r"|Sending process \d+ closing signal SIG"  # torchrun stopping the other workers
        r"|[Tt]raining errored after \d+ iterations|^\s*(?:\[\d+\] +)?\d+ (?:exit \d+|killed"
        r"|interrupt) {2}\S",
    ),
    (
        "exception",
        r"^(?:\w+\.)*\w*(?:Error|Exception):|\b(?:Uncaught|Unhandled) (?:\w+\.)*\w*(?:Error"
        r"|Exception)\b"
        r"|Error reported to Coordinator: "  # TensorFlow's: a worker thread raised
        r"|^EXCEPTION occurred: "  # CNTK's
        r"|\bd2\.engine\.train_loop\]: Exception during training",  # detectron2's
    ),
]
RESUME = (
    r"(?i)resum(?:e|ed|ing) (?:training |the training )?from|loading checkpoint|"
    r"Starting training from iteration \d|"  # detectron2's launch (0: a fresh one)
    r"loaded checkpoint|load(?:ed|ing)? (?:model )?(?:state )?from checkpoint|"
    r"continuing training from|restor(?:ed|ing) (?:from )?checkpoint|"
    r"resume_from_checkpoint|auto[- ]?resum|"
    r"Restoring parameters from \S*ckpt-\d"  # TensorFlow's Saver, from a step's checkpoint
)
SAVE = (  # (not a command line's ``--save model.pt`` flag)
    r"(?i)(?:^|[^-\w])sav(?:e|ed|ing) (?:model )?(?:checkpoint|ckpt|model)|checkpoint saved|"
    r"saved checkpoint|Saving (?:model )?weights|saving model to"
)
# a script's word that a loss was non-finite and the step skipped or zeroed, with no
# value printed (deepspeech.pytorch: ``WARNING: received a nan loss, setting loss value
# to 0``): a non-finite loss at the record it precedes
NAN_LOSS = r"(?i)received an? (?:nan|inf) loss|\bnan loss (?:detected|encountered)"
# a training script's own word that it finished (a clean end: steps that go back after
# it are another run, not a relaunch)
END = (
    r"(?i)^\s*(?:finished training|training (?:is )?(?:finished|completed|complete|done)\b)"
    r"|\bProcess \d+ exits successfully"
)
OVERFLOW = (
    r"OVERFLOW!|(?i:grad(?:ient)? overflow|overflow detected|skipping step)|"
    r"Attempted loss scale|loss scale (?:reduced|decreased)|setting loss scale to|"
    r"Found inf or nan, current scale is"  # Paddle's GradScaler
    r"|optimizer not run, scale_before"  # PaddleNLP's Trainer
    r"|found inf during \w+ step"  # ColossalAI's ShardedOptimizerV2
    r"|Found NaN, decreased lg_loss_scale"  # guided-diffusion's fp16 trainer
    # a step skipped for a non-finite gradient or loss (ESPnet's ``The grad norm is nan.
    # Skipping updating the model.``, ``Loss in not finite. Skip this training step.``)
    r"|(?i:(?:grad(?:ient)? norm|loss) (?:is|in) (?:not finite|nan|inf)\b.{0,40}\bskip)"
)
OVERRIDE = r"^Overriding: (\w+) = (.+)$|^(?:--)?(learning_rate|lr)\s*[=:]\s*([-+.\deE]+)\s*$"
# a scheduler's message: Keras' ``Epoch 00005: ReduceLROnPlateau reducing learning rate
# to 0.0001.``, PyTorch's ``Epoch 00005: reducing learning rate of group 0 to 1.0000e-04.``
PLATEAU = (
    r"(?i)reducing learning rate (?:of group \d+ )?to ([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)"
)
ANY = "|".join(
    f"(?:{p})"
    for p in [RESUME, SAVE, OVERFLOW, OVERRIDE, PLATEAU, NAN_LOSS] + [p for _, p in CRASH_CAUSES]
)
# a Python traceback's lines that say nothing of their own (its first line, the lines
# between chained exceptions, a caret marker; its indented frames are told by indentation)
# (also glued onto a progress bar's last state: ``0/30 [00:00<?, ?it/s]Traceback ...``)
# (rich's boxed traceback too: ``╭──── Traceback (most recent call last) ────╮``)
TRACEBACK_START = r"(?:^|[\]|\u2500\u256d]\s*)Traceback \(most recent call last\)"
# begun after a progress bar, on its line (``...loss=nan][rank0]: Traceback (most ...``,
# Keras' ``- mse: nanTraceback (most ...``)
TRACEBACK_GLUED = r"[\]|\w](?:\s*\[rank\d+\]:)?\s*Traceback \(most recent call last\)"
TRACEBACK_REACH = 200  # lines after a traceback's first line its exception may come
# any crash evidence (one vectorized test; the cause is told by ``read_event``)
CRASH_ANY = "|".join(f"(?:{p})" for _, p in CRASH_CAUSES)
# what a record line may carry glued onto it and is read from it: crash evidence,
# DeepSpeed's overflow message, a traceback's start
GLUED_OVERFLOW = "OVERFLOW! Rank"
GLUED_ANY = f"{CRASH_ANY}|{GLUED_OVERFLOW}|{TRACEBACK_GLUED}"
TRACEBACK_BODY = (
    r"^Traceback \(most recent call last\)|^During handling of the above|^The above exception"
    r"|^\^+$"
)

_CAUSES = [(c, re.compile(p)) for c, p in CRASH_CAUSES]
_KERAS_NAN = re.compile(r"Batch (\d{1,15}): Invalid loss, terminating training")
_RESUME = re.compile(RESUME)
_SAVE = re.compile(SAVE)
_OVERFLOW = re.compile(OVERFLOW)
_NAN_LOSS = re.compile(NAN_LOSS)
_OVERRIDE = re.compile(OVERRIDE)
_PLATEAU = re.compile(PLATEAU)
_STEP = re.compile(r"(?i)(?:iteration|iter|step|global_step|global step)[\s:=]*(\d+)")
_SCALES = re.compile(
    # (not apex's ``loss scaler 0``: the scaler's index)
    r"(?i)(?:attempted loss scale|loss scale(?!r))\D{0,12}?(\d[\d.eE+-]*)\D{1,30}?"
    r"(?:reducing|setting|to)\D{0,12}?(\d[\d.eE+-]*)"
)
# apex's ``Skipping step, loss scaler 0 reducing loss scale to 1.52587890625e-05``
# PaddleNLP's ``optimizer not run, scale_before: 0.25, scale_after: 0.125``
_BEFORE_AFTER = re.compile(r"scale_before:\s*(\d[\d.eE+-]*),\s*scale_after:\s*(\d[\d.eE+-]*)")
_CKPT_STEP = re.compile(r"Restoring parameters from \S*ckpt-(\d{1,15})\b")
_START_ITER = re.compile(r"Starting training from iteration (\d{1,12})\b")
_NEW_SCALE = re.compile(r"(?i)(?:reducing|setting) loss scale to:?\s*(\d[\d.eE+-]*)")
# DeepSpeed's ``Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to
# 1``: the scale is kept (no new scale), the step is skipped all the same
_HYSTERESIS = re.compile(r"(?i)attempted loss scale\D{0,12}?(\d[\d.eE+-]*),? but hysteresis")
_BAR = re.compile(r"\b(\d{1,12})/\d+ \[")  # a tqdm bar's position: ``378/2724 [``
_LR_KEYS = {"learning_rate", "lr", "max_lr"}
TEXT_MAX = 300


def read_event(s: str, line: int, name: str) -> EventBase | None:
    """The event one selected line states, or None."""
    src = Source(file=name, line=line)
    text = s[:TEXT_MAX]
    step = _step(s)
    if m := _OVERRIDE.match(s):
        key, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        number = _float(value)
        if key in _LR_KEYS and number is not None:
            return LrChange(new=number, manual=True, source=src, text=text)
        return ConfigChange(key=key, new=value.strip()[:TEXT_MAX], source=src, text=text)
    if m := _PLATEAU.search(s):
        return LrChange(new=_float(m.group(1)), manual=False, source=src, text=text)
    if _NAN_LOSS.search(s):  # (its step: the record it precedes, see ``extract``)
        return Nonfinite(metric="loss", value="nan", source=src, text=text)
    if _OVERFLOW.search(s):
        if step is None and (bar := _BAR.search(s)):
            step = int(bar.group(1)) + 1  # glued to a progress bar: the step it is on
        m = _SCALES.search(s) or _BEFORE_AFTER.search(s)
        old, new = (_float(m.group(1)), _float(m.group(2))) if m else (None, None)
        if m is None and (m := _NEW_SCALE.search(s)):
            new = _float(m.group(1))
        elif m is None and (m := _HYSTERESIS.search(s)):
            old = _float(m.group(1))
        return OverflowSkip(step=step, attempted_scale=old, new_scale=new, source=src, text=text)
    for cause, rx in _CAUSES:
        if rx.search(s):
            if keras := _KERAS_NAN.search(s):  # a 0-based batch: the bar counts from 1
                step = int(keras.group(1)) + 1
            return HardwareFailure(cause=cause, step=step, source=src, text=text)
    if _RESUME.search(s):
        if m := _START_ITER.search(s):  # the 0-based iteration it runs first
            step = max(int(m.group(1)) - 1, 0)
        elif m := _CKPT_STEP.search(s):  # the step the checkpoint was saved at
            step = int(m.group(1))
        return Restart(resume_step=step, source=src, text=text)
    if _SAVE.search(s):
        return CheckpointSave(step=step, source=src, text=text)
    return None


def _step(s: str) -> int | None:
    m = _STEP.search(s)
    if not m or len(m.group(1)) > 18:
        return None
    return int(m.group(1))


def _float(v: str) -> float | None:
    try:
        return float(v.strip().rstrip(",;"))
    except ValueError:
        return None


def cut_tracebacks(
    starts: list[tuple[int, str]], crash_lines: list[int], name: str
) -> list[HardwareFailure]:
    """Tracebacks (``starts``: their first lines and texts) whose exception never comes,
    no crash evidence among the ``TRACEBACK_REACH`` lines after them (``crash_lines``:
    the lines of the evidence found, sorted): the excerpt or the file ends inside them.
    Each is crash evidence by itself: cause ``exception``, at its first line."""
    out = []
    for line, text in starts:
        k = bisect.bisect_right(crash_lines, line)
        if k < len(crash_lines) and crash_lines[k] - line <= TRACEBACK_REACH:
            continue
        src = Source(file=name, line=line)
        out.append(HardwareFailure(cause="exception", source=src, text=text[:TEXT_MAX]))
    return out
