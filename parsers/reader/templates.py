"""Line shapes -> templates: which value of a line is which column.

A line's *shape* is the line with every value replaced by ``#`` (and runs of white
space made one space): the records a logger prints over and over share one shape. For
each shape, one example line is read here, in Python, into a :class:`Template`: for
the n-th value of the line, its key (the words before it, up to the previous value or
separator), its unit (what is glued after it), and the column it goes to. Everything
else happens in columns (:mod:`parsers.reader.extract`).

Keys are found the way a person reads them: ``key: v``, ``key=v``, ``key v``,
``| key v |``, ``'key': v`` / ``"key": "v"`` (Python or JSON dicts); a value right
after ``/`` is the total of the one before (``10/ 500000``, ``[ 40/1251]``); one in
parentheses after another is its running mean (``loss: 6.91 (6.93)``); a value with no
key at the start of a line is a step (``1230 | loss 1.23``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from parsers.reader import aliases
from parsers.reader.numbers import NUMBER_RE, count_scale, unit_of, unit_scale

_IN_KEY = re.compile(r"^\)\s*[:=]")  # a number closing a key's parentheses
# ``number of nan iterations: 0`` (Megatron): a nan or inf within a counted thing's name
_COUNTED_PRE = re.compile(r"(?i)\b(?:of|num|count|total)\s+$")
_COUNTED_AFTER = re.compile(r"^\s+[A-Za-z_][\w ]{0,30}[:=]")
# ``seconds for 100 batch: 56.97``, ``time per 100 iters: 5.2``: a count within a key
_COUNT_PRE = re.compile(r"(?i)\b(?:for|per|over|every|last)\s+$")
_COUNT_AFTER = re.compile(
    r"(?i)^\s+(?:[A-Za-z]+\s+){0,2}"  # (``per 100 training steps:``)
    r"(?:batch|batches|steps?|iters?|iterations?|samples?|tokens?|updates?|epochs?)\s*[:=]"
)
_NOUN = re.compile(r" ([A-Za-z]+)")
_MEAN_WORD = re.compile(r"(?i)^\(\s*(?:avg|mean|average|ema)\s*[:=]?$")
_TOKENS = re.compile(r"<(?:time|dur)>")
_SEP = re.compile(r"[|,;{}\[\]\t\u2022]|\s{2,}|\s-\s|<time>|<dur>")
_TRAIL = " \t:='\"[({<>-"
_MAX_KEY_WORDS = 6
# words that say a line reports an evaluation, not a training step
_EVAL = re.compile(
    r"(?i)\b(?:val|valid|validation|eval|evaluation|evaluating|test)\b|^(?:eval|val|test)_"
)
_EVAL_KEY = re.compile(r"(?i)^(?:val|valid|validation|eval|test|predict)(?:_|/|\s|$)")
# a line that announces an evaluation (MetricLogger's ``Test:``, mmengine's ``Epoch(val)``)
_EVAL_HEAD = re.compile(
    r"(?:^|[\s\]|:>-])(?:Test|Eval|Evaluation|Validation|Valid|Val|Evaluating)"
    r"(?:\s*\([^)]{1,20}\))?(?::|\s+\[)"  # (timm's ``Test (EMA): [ 0/195]`` too)
    r"|\((?:val|test)\)|(?i:\[(?:val|valid|validation|eval|test)\])"
    r"|^(?i:val|valid|test|eval)\[\s*\d"  # a ProgressMeter named ``val``: ``val[ 0/40]``
    r"|\bCV (?:Batch|Epoch|Step|Iter)\b"  # cross-validation: WeNet's ``CV Batch 4/0 loss``
)
# a dict record printed by Python or as JSON: its keys are quoted
_DICT = re.compile(r"\{\s*['\"]")
# loguru trainers' ``| [Loss] 51566519.44 | [step]    89 |``: a bracketed word names
# the value after it (read so only where a line has two such fields at least)
_BRACKET_KEY = re.compile(r"\[([A-Za-z][\w./ -]{0,30})\]\s*$")
_BRACKET_FIELDS = re.compile(r"\[[A-Za-z][\w./ -]{0,30}\]\s*[-+]?(?:\d|\.\d|nan|inf)", re.I)
METRICS = ("loss", "lr", "grad_norm")
_PHASE_WORDS = {"train", "training", "ep"}  # words that name an epoch before its counter
_EPOCH_KEYS = {"epoch", "training_epoch", "train_epoch", "epoch_train", "epochs", "ep"}
_OF_EPOCH = re.compile(r"(?i)^(?:training|train) of epoch$")
# a step key's rank when a line has several (global_step beats the iteration in its epoch)
STEP_RANK = {
    "global_step": 0,
    "globalstep": 0,
    "global_batch_idx": 0,
    "total_train_updates": 0,
    "num_updates": 1,
    "step": 2,
    "iteration": 3,
}


@dataclass
class Field:
    """The n-th value of a line: what it is and where it goes."""

    index: int
    key: str | None
    unit: str
    column: str | None = None  # None: not kept (a total, an unnamed value)
    scale: float = 1.0
    role: str = "value"  # value, step, total, mean, position, epoch
    cut: bool = False  # the last value of a line cut short: read only if whole (nan, inf)
    pre: str = ""  # the text between the value before and this one
    noun: str = ""  # the word right after the value and a space (``24 samples``)


@dataclass
class Template:
    """What one line shape holds. ``kind``: record, header (a step alone, its metrics
    on the lines that follow), pair (one ``key=value``), epoch (an epoch alone, the
    records after it counting steps within it), validation, summary, or ``None`` (not
    a metric line)."""

    shape: str
    kind: str | None
    fields: list[Field] = field(default_factory=list)
    dict_line: bool = False
    count: int = 1  # lines of this shape in the file
    bare: bool = False  # two bare numbers (``1 -0.00138``): a record only in a file of them
    epoch_base: int | None = None  # the number of the first epoch, where the layout says

    def columns(self) -> list[Field]:
        return [f for f in self.fields if f.column is not None]

    def step_field(self) -> Field | None:
        return next((f for f in self.fields if f.role == "step"), None)

    def has(self, column: str) -> bool:
        return any(f.column == column for f in self.fields)


_POSSESSIVE = re.compile(r"(?<=\w)'s\b")


def _key(pre: str) -> str | None:
    """The key a value's preceding text names, or None."""
    pre = _TOKENS.sub(" | ", pre)  # a stamp or a duration ends whatever came before
    chunk = _SEP.split(pre.rstrip(_TRAIL))[-1].strip(_TRAIL + " ")
    if ":" in chunk:  # a logger's ``INFO:root:step`` or ``name:key``
        chunk = chunk.rsplit(":", 1)[-1].strip()
    chunk = chunk.strip("'\"` ")  # ``"message": "step 10``: the key is inside the string
    chunk = chunk.lstrip(") ")  # ``(Avg 0.55) Dice:0.30``: the parenthesis closed before it
    # (a possessive is no quote: LightGBM's ``training's binary_logloss: 0.71``)
    unquoted = _POSSESSIVE.sub("", chunk)
    if not chunk or not re.search(r"[A-Za-z]", chunk) or re.search(r"['\"`]", unquoted):
        return None
    words = chunk.split()
    if len(words) > _MAX_KEY_WORDS:
        return None
    return chunk


def read_fields(line: str, extra: dict[str, str] | None = None) -> list[Field]:
    """The values of one example line, with their keys, units and columns."""
    out: list[Field] = []
    prev_end = 0
    bracketed = len(_BRACKET_FIELDS.findall(line)) >= 2
    # a dict's values end at its closing brace (``{'loss': 1.14}    <-- spike (step 4)``:
    # what follows is a note pasted beside it)
    close = line.rfind("}") if _DICT.search(line) else -1
    for i, m in enumerate(NUMBER_RE.finditer(line)):
        pre = line[prev_end : m.start()]
        after = line[m.end() :]
        if 0 <= close < m.start() and line[close + 1 : m.start()].strip():
            out.append(Field(index=i, key=None, unit="", role="note"))
            continue
        if _names_key(m.group(), line[prev_end : m.start()], after):
            out.append(Field(index=i, key=None, unit="", role="key"))
            continue
        unit = unit_of(after)
        prev_end = m.end() + len(unit)
        named = _BRACKET_KEY.search(pre) if bracketed else None
        key = named.group(1).strip() if named else _key(pre)
        stripped = pre.strip(" '\"")
        f = Field(index=i, key=key, unit=unit, pre=pre)
        if not unit and (noun := _NOUN.match(after)):
            f.noun = noun.group(1).lower()
        if key is None and out and stripped.endswith("/"):
            f.role = "total"
        elif (
            out
            and out[-1].column
            and _closes(after, unit)
            and (stripped == "(" or (_MEAN_WORD.match(stripped) and key is not None))
        ):  # ``loss: 6.91 (6.93)``, UCTransNet's ``Loss:0.564 (Avg 0.5566)``
            f.role, f.key = "mean", None
            f.column = f"{out[-1].column}_avg"
            f.scale = out[-1].scale
        elif key is None and after[len(unit) :].lstrip().startswith("/"):
            f.role = "position"
        elif key is None and i == 0 and not pre.strip(" [(|#") and not unit:
            f.role = "lead"  # (a leading ``25%`` is a progress bar's, not a step)
        out.append(f)
        _assign(f, key, unit, extra, m.group().isdigit())
    return out


def _names_key(token: str, before: str, after: str) -> bool:
    """Whether a number is part of a key's name, not a value: ``optim/LR (group 0)=1e-4``,
    the nan of ``number of nan iterations: 0``, the 100 of ``seconds for 100 batch:``."""
    if _IN_KEY.match(after):
        return True
    if token.isalpha() and _COUNTED_PRE.search(before) and _COUNTED_AFTER.match(after):
        return True
    return bool(_COUNT_PRE.search(before) and _COUNT_AFTER.match(after))


def _closes(after: str, unit: str) -> bool:
    """Whether a value (with its unit) closes the parentheses it opened: ``(6.93)``."""
    return after[len(unit) :].lstrip().startswith(")")


def _assign(
    f: Field, key: str | None, unit: str, extra: dict[str, str] | None, whole: bool = False
) -> None:
    if f.role in ("total", "mean", "position", "lead", "key", "note"):
        return
    if key is None:
        if unit == "ms":  # an unnamed time per step (llama2.c's ``| 123.45ms |``)
            f.column, f.scale = "step_time_s", 1e-3
        return
    col = aliases.canonical(key, extra)
    if key == "s" and whole and not unit and col is None:
        # a one-letter step key: llm.c's main.log ``s:243 trl:6.1499 lr:0.000209``,
        # RWKV's bar ``miniE 1 s 833 prog 20.00% : ... loss 1.687660``
        col = aliases.STEP
    if col == aliases.STEP and unit == "%":  # ``Iteration:  23%|...``: a bar's progress
        col = None
    if col == aliases.STEP:
        f.role, f.column = "step", "step"
        return
    # (DeepSpeech's ``Training of Epoch 0 - loss: inf``: a phase's epoch)
    if col == "epoch" or aliases.norm(key) in _EPOCH_KEYS or _OF_EPOCH.search(key):
        f.role, f.column = "epoch", "epoch"
        return
    is_time = col in aliases.TIME_COLUMNS
    if col is None:
        col = aliases.column_of(key)
        if unit == "%":
            col = f"{col}_pct"
    f.column = col
    f.scale = unit_scale(unit or aliases.key_unit(key), is_time)
    count = count_scale(unit)
    if is_time and count is not None:  # ``time_per_iteration_ms: 28.2K``: thousands of ms
        f.scale = count * unit_scale(aliases.key_unit(key) or "s", True)


def template(
    shape: str, example: str, extra: dict[str, str] | None = None, any_value: bool = False
) -> Template:
    """The template of one shape, read from one of its lines (``any_value``: a step and
    any named value make a record, where a framework logs no loss, e.g. throughput)."""
    fields = read_fields(example, extra)
    t = Template(shape=shape, kind=None, fields=fields, dict_line=bool(_DICT.search(example)))
    _one_step(t)
    _epoch_before_position(t)
    _batch_in_epoch(t)
    _dedupe(t)
    _unnamed_loss(t, example)
    _counter_then_value(t, example)
    _lettered_total(t)
    _total_loss(t)
    t.kind = _kind(t, example, any_value)
    if t.kind == "record":
        _lead_step(t)
    return t


# a loop's ``print(loss)`` of a scalar tensor, alone on its line
_TENSOR_LINE = re.compile(
    r"^\s*tensor\(\s*[-+]?(?:\d[\d.eE+-]*|nan|inf)\s*(?:,\s*device='[\w:]+')?"
    r"(?:,\s*(?:dtype=torch\.\w+|grad_fn=<\w+>|requires_grad=True))*\s*\)\s*$"
)


def _unnamed_loss(t: Template, example: str) -> None:
    """A scalar tensor printed alone on a line (``tensor(3.2207, device='cuda:0')``, a
    loop's ``print(loss)``) is the loss. ``  10000/ 200000: 2.0322`` (makemore's
    notebooks): a counter with its total and one value after a colon, nothing named: the
    value is the loss; so is the one value after a step key's number and its colon
    (``iter 1: 1.764603``, a loss list typed out)."""
    if _TENSOR_LINE.match(example) and t.fields:  # ``tensor(3.2207, device='cuda:0')``
        for f in t.fields:
            f.column = None
        t.fields[0].column, t.fields[0].role, t.fields[0].scale = "loss", "value", 1.0
        return
    roles = [f.role for f in t.fields]
    if roles == ["step", "value"] and t.fields[0].key is not None:
        last = t.fields[1]
    elif roles == ["position", "total", "value"] and ":" not in example[:1]:
        last = t.fields[2]
    elif roles == ["lead", "value"] and t.fields[1].key is None:
        # WaveGlow's ``5038:<TAB>nan``, a reference file's ``1 -0.00138``: the iteration
        # (a whole number), its loss
        tokens = NUMBER_RE.findall(example)
        last = t.fields[1]
        if tokens[:1] and tokens[0].isdigit() and not last.pre.strip() and not last.unit:
            last.column, t.bare = "loss", True
            return
    else:
        return
    if last.key is None and last.pre.strip() == ":" and not last.unit:
        last.column = "loss"


def _counter_then_value(t: Template, example: str) -> None:
    """``Train loss 174 0.163115 Grad Norm 0.404827 5.34s/it`` (NVIDIA's Tacotron 2 and
    WaveGlow): a metric's key, a whole number, then an unnamed value: the whole number
    is the iteration, the value the metric's (where nothing else is the step)."""
    if t.step_field() is not None or len(t.fields) < 2:
        return
    tokens = NUMBER_RE.findall(example)
    f, g = t.fields[0], t.fields[1]
    if not (f.column in METRICS and f.role == "value" and g.role == "value" and g.key is None):
        return
    if f.index >= len(tokens) or not tokens[f.index].isdigit() or g.pre.strip() or g.unit:
        return
    g.column, g.scale = f.column, f.scale
    f.role, f.column, f.scale = "step", "step", 1.0


def _total_loss(t: Template) -> None:
    """``Gen Loss Total : 101.349, Mel-Spec. Error : 2.058`` (HiFi-GAN), ``Total Loss:
    3.2, Mel Loss: ...`` (FastSpeech 2): where no key is the loss itself, the one loss
    that names itself the total is."""
    if any(f.column == "loss" for f in t.fields):
        return
    total = [
        f
        for f in t.fields
        if f.key and f.role == "value" and _TOTAL_LOSS.search(f.key) and not _EVAL.search(f.key)
    ]
    if len(total) == 1:
        total[0].column = "loss"


_TOTAL_LOSS = re.compile(r"(?i)(?=.*\bloss)(?=.*\b(?:total|overall)\b)")


def _lettered_total(t: Template) -> None:
    """``B: 5.495 | C: 3.668 | M: 6.919 | S: 1.564 | T: 17.647`` (YOLACT and its forks):
    losses keyed by one capital letter each, ``T`` their total: that total is the loss,
    where nothing else on the line is."""
    letters = [f for f in t.fields if f.key and len(f.key) == 1 and f.key.isupper()]
    total = [f for f in letters if f.key == "T"]
    if len(letters) >= 3 and total and not any(f.column == "loss" for f in t.fields):
        total[0].column = "loss"


def _epoch_before_position(t: Template) -> None:
    """``Train: 3 [ 100/1251 (8%)]`` (timm): the number a phase word names, right before
    a counter with its total, is the epoch the counter runs in; so is a phase word's
    own counter before it (``Train: [3/300][100/2859]``)."""
    for f, g in zip(t.fields, t.fields[1:], strict=False):
        phase = f.key is not None and aliases.norm(f.key) in _PHASE_WORDS
        # (``train 21%|██▏ | 161543/770000``: a bar's percentage is no epoch)
        if g.role == "position" and f.role == "value" and phase and f.unit != "%":
            f.role, f.column = "epoch", "epoch"
            t.epoch_base = 0  # (timm numbers its first epoch 0)
    # ``Train: [3/300][100/2859]`` (Swin Transformer and its descendants): a phase
    # word's counter with its total, then another: the epoch, then the batch within it
    for f, g, h in zip(t.fields, t.fields[1:], t.fields[2:], strict=False):
        # (the phase word ends the key: ``INFO Train: [``)
        phase = f.key is not None and aliases.norm(f.key).split("_")[-1] in _PHASE_WORDS
        if phase and f.role in ("step", "value") and g.role == "total" and h.role == "position":
            f.role, f.column = "epoch", "epoch"


def _batch_in_epoch(t: Template) -> None:
    """``Epoch[2] Batch [50]`` (MXNet's Speedometer), ``Epoch 0, batch 500,`` (icefall),
    ``[Epoch 0][Batch 1],`` (GluonCV):
    a batch number bracketed or listed right after the epoch is its step, counted
    within that epoch (``batch 32`` elsewhere is a size), unless the line counts its
    steps over the epochs too (ZipVoice's ``global_batch_idx: 50``)."""
    if any(f.role == "step" for f in t.fields):
        return
    for f, g in zip(t.fields, t.fields[1:], strict=False):
        # (GluonCV's ``[Epoch 0][Batch 1],``: one bracket closed, the next opened)
        bracketed = g.pre.rstrip().endswith("[") or g.pre.lstrip().startswith((",", "]["))
        batch = aliases.norm(g.key or "") == "batch"
        if f.role == "epoch" and g.role == "value" and bracketed and batch:
            g.role, g.column = "step", "step"


def _one_step(t: Template) -> None:
    """Several step keys on one line: the most global one is the step, the others
    keep their own columns."""
    steps = [f for f in t.fields if f.role == "step"]
    if len(steps) < 2:
        return
    best = min(steps, key=lambda f: STEP_RANK.get(aliases.norm(f.key or ""), 5))
    best.column = "step"
    for f in steps:
        if f is not best:
            name = aliases.column_of(f.key or "step")
            # (``Step:209/281  GlobalStep:210``: the step within the epoch keeps a column
            # of its own)
            f.role, f.column = "value", "local_step" if name == "step" else name


def _dedupe(t: Template) -> None:
    """Two keys on one column (``loss`` and ``lm loss``): the first keeps it."""
    seen: set[str] = set()
    for f in t.fields:
        if f.column is None:
            continue
        if f.column in seen:
            f.column = aliases.column_of(f.key) if f.key else None
            if f.column in seen:
                f.column = None
        if f.column is not None:
            seen.add(f.column)


def _kind(t: Template, example: str, any_value: bool = False) -> str | None:
    keys = [f.key for f in t.fields if f.key]
    metrics = [f for f in t.fields if f.column in METRICS or (f.key and "loss" in f.key.lower())]
    has_step = t.step_field() is not None
    evaluative = any(_EVAL_KEY.match(k) for k in keys) and not (
        _training_fields(t) or _epoch_end(t) or epoch_only(t) or _boosting_round(t)
    )
    evaluative = evaluative or bool(_EVAL_HEAD.search(example))
    shell = example.rstrip().endswith("\\")  # ``TRAIN_ITERS=137650 \`` of a job script
    if evaluative or (_EVAL.search(example) and not train_loss(t)):
        # (Keras' ``Train on 220 samples, val on 24 samples`` counts data, measures nothing;
        # ``--eval_steps 50 \`` is a command line's)
        return "validation" if (metrics or evaluative) and _measures(t) and not shell else None
    # (the closing dict; a dict that also logs a loss is a record that tells the time
    # so far: Unsloth's ``{'loss': '14.88', ..., 'train_runtime': '110.7'}``)
    runtime = any(aliases.norm(k).startswith("train_runtime") for k in keys)
    if t.dict_line and runtime and not any(aliases.norm(k) == "loss" for k in keys):
        return "summary"
    lead = t.fields and t.fields[0].role in ("lead", "position")
    counted = has_step or lead or _epoch_position(t) or _counted(t) or epoch_only(t)
    # (a step alone is no record, nor one with a setting: ``trial:1/30 seed:0``)
    named = [f for f in t.fields if f.key and f.role != "step" and not _setting(f.key)]
    if (metrics and (counted or t.dict_line)) or (any_value and counted and named):
        return "record"
    if has_step and not metrics and not shell:
        return "header"
    if [f.role for f in t.fields] in (["epoch"], ["epoch", "total"]):
        return "epoch"  # ``Epoch 2/10`` alone: the records after it are of that epoch
    if len(t.fields) == 1 and t.fields[0].key and not has_step and "=" in example and not shell:
        return "pair"
    return None


_COUNTED_UNITS = {"samples", "sample", "examples", "images", "batches", "steps", "tokens", "files"}
# counts of data and settings, not measures: ``batch size 32``, ``num_samples``, and a
# config pasted above a log (``eval_steps: 50``, ``val_size: 0``)
_SIZE_ENDS = ("samples", "examples", "_size", "_steps", "_interval", "_freq", "_frequency")
_SIZE_ENDS += ("_every", "_strategy")


_SETTINGS = {"seed", "random_seed", "rank", "local_rank", "world_size", "trial", "run"}


def _setting(key: str) -> bool:
    """A key that names a setting of the run, never a measure of a step."""
    return aliases.norm(key) in _SETTINGS


def _measures(t: Template) -> bool:
    """Whether a line holds a value that is no count of data or setting (``24 samples``,
    ``batch size 32``, ``eval_steps: 50``): a validation line measures something."""
    for f in t.fields:
        if f.column is None or f.role not in ("value", "mean"):
            continue
        name = aliases.norm(f.key or "")
        counted = (f.unit or f.noun).lower() in _COUNTED_UNITS
        if not (counted or name.endswith(_SIZE_ENDS) or name.startswith("num_")):
            return True
    return False


def _training_fields(t: Template) -> bool:
    """A line that also carries what only a training step reports (lr, grad norm, step
    time, a batch count): a record with validation values appended (NeMo)."""
    train = {"lr", "grad_norm", "step_time_s", "batch_size", "samples", "tokens", "loss_scale"}
    return train_loss(t) and any(f.column in train for f in t.fields)


def _boosting_round(t: Template) -> bool:
    """A gradient-boosting round, every watched set's metric on one line after the round
    in brackets and a tab (XGBoost's ``[500]\teval-logloss:0.41\ttrain-logloss:0.16``,
    LightGBM's ``[2]\ttraining's binary_logloss: 0.73\tvalid_1's ...``): a record
    where the training set's loss is one of them."""
    lead = t.fields[:1]
    if not lead or lead[0].pre.strip() != "[" or len(t.fields) < 2:
        return False
    return t.fields[1].pre.startswith("]\t") and train_loss(t)


def _epoch_end(t: Template) -> bool:
    """A progress bar with the epoch's validation values after the training ones
    (Keras: ``9595/9595 [====] - 1s - loss: 0.62 - val_loss: 0.53``; Lightning:
    ``Epoch 3: 100%|█| 782/782 [...] train_loss=1.15, val_loss=0.93``): a record, its
    validation values columns of it."""
    roles = [f.role for f in t.fields]
    bar = any(a == "position" and b == "total" for a, b in zip(roles, roles[1:], strict=False))
    return bar and train_loss(t)


def _counted(t: Template) -> bool:
    """A value with its total (``[  40/5000000]``) that is not a metric."""
    pairs = zip(t.fields, t.fields[1:], strict=False)
    return any(g.role == "total" and f.column not in METRICS for f, g in pairs)


def epoch_only(t: Template) -> bool:
    """A line of one epoch's training loss with no other counter (``Epoch 3, train loss:
    0.71, val loss: 0.85``; SpeechBrain's ``epoch: 33, lr: ... - train loss: ...``): the
    epoch is its step (not a dict's fractional ``'epoch': 0.02``)."""
    roles = [f.role for f in t.fields]
    counters = {"step", "position", "lead", "total"}
    if "epoch" in roles and roles[roles.index("epoch") + 1 : roles.index("epoch") + 2] == [
        "total"
    ]:  # (the epoch of its total: ``Epoch [613/1000], Train Loss: ...``)
        roles = roles[: roles.index("epoch") + 1] + roles[roles.index("epoch") + 2 :]
    return (
        roles.count("epoch") == 1
        and not counters & set(roles)
        and not t.dict_line
        and train_loss(t)
    )


def train_loss(t: Template) -> bool:
    return any(f.column == "loss" and f.key and not _EVAL_KEY.match(f.key) for f in t.fields)


def _epoch_position(t: Template) -> bool:
    roles = [f.role for f in t.fields]
    return "epoch" in roles and "position" in roles


def _lead_step(t: Template) -> None:
    """A record without a named step: its leading value, or the position within its
    epoch, is the step."""
    if t.step_field() is not None:
        return
    if _epoch_position(t):
        return
    first = t.fields[0] if t.fields else None
    second = t.fields[1] if len(t.fields) > 1 else None
    if first is not None and first.role == "lead" and second is not None and second.pre == "|":
        # ``1|100|Loss: 2.3`` (torchtune's bar): epoch, then the step
        first.role, first.column = "epoch", "epoch"
        second.role, second.column = "step", "step"
        return
    if first is not None and first.role in ("lead", "position"):
        first.role, first.column = "step", "step"
        bare = second is not None and second.key is None and second.role == "value"
        # (``333 154 Loss=nan``; PyTorch's tutorials: ``[1,  2000] loss: 2.187``)
        apart = second is not None and second.pre.strip() in ("", ",")
        if bare and second.column is None and apart and not second.unit:
            # ``333 154 Loss=nan``: a second bare counter; the epoch and the batch in it
            # where the first repeats while it counts (``records._bare_counter``)
            second.column = "_counter"
        return
    # a count with its total (``Training  [  40/5000000]``): the step of the line (an
    # epoch of its total, ``epoch: [1/10]``, is no step: PaddleOCR logs many an epoch)
    for f, g in zip(t.fields, t.fields[1:], strict=False):
        if g.role == "total" and f.column not in METRICS and f.role != "epoch":
            f.role, f.column = "step", "step"
            return


def truncated(shape: str, records: list[Template]) -> Template | None:
    """The record template a line cut short (at the end of a paste) begins, if any:
    its shape is the start of a record shape, with at least a step and one value (or
    the step and an ellipsis)."""
    n = shape.count("#")
    cut = re.sub(r"[#\w.]+$", "", shape).rstrip()
    for t in records:
        if t.shape == shape or not t.shape.startswith(cut) or len(cut) < 0.3 * len(t.shape):
            continue
        step = t.step_field() or next((f for f in t.fields if f.role == "position"), None)
        whole = n - (1 if shape.endswith("#") else 0)  # numbers not cut (a cut one may be)
        # (a step and no value is a record cut short only where its values were left
        # out on purpose: ``completed step: 101, ...``; ``global step 700: l`` is a cut)
        elided = shape.rstrip().endswith(("...", "\u2026"))
        if step is not None and step.index < whole and (whole >= 2 or elided):
            return t
    return None
