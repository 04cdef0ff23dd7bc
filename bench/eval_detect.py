"""Detection benchmark: logbook's detectors against labels and against three baselines.

Runs the labelled synthetic suite of ``gen_detect`` (and, with ``--corpus DIR``, the
hand-labelled real logs of a corpus directory holding ``labels.json`` and ``logs/``;
with ``--curve``, a healthy Megatron golden-values curve; with ``--seeds``, one summary
line per seed of the suite),
and prints per kind: labels, findings, precision, recall (a match within three log
intervals), F1, false alarms per 10,000 healthy steps and, for loss spikes, how many
precursors were found and their median lead; then the loss-spike rules of llm-foundry,
OLMo-core and Megatron on the same runs. ``--write`` replaces the ``## Detection``
section of bench/RESULTS.md with the output.

    python -m bench.eval_detect [--seed N] [--seeds 0,1,2] [--set detector.field=value]... [--jsonl]
        [--curve GOLDEN.json] [--corpus DIR] [--speed [--parse-log LOG]] [--write]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench._eval_match import (
    ALARM,
    Tally,
    _overlaps_any,
    finding_dict,
    healthy_steps,
    score_kind,
)
from bench.baselines import BASELINES
from bench.gen_detect import generate, suite
from logbook.atomic import atomic_open
from logbook.detectors import detect
from logbook.detectors._config import build_config

KINDS = (
    "loss_spike",
    "nonfinite",
    "loss_scale_collapse",
    "activation_norm_drift",
    "restart",
    "lr_change",
    "divergence",
    "throughput_drop",
)
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HEADER = """Command: `python -m bench.eval_detect --seeds 0,1,2,3,4 --curve GOLDEN.json --corpus
CORPUS --speed --parse-log LOG --write` (GOLDEN: the Megatron-LM golden values of the
GPT-3 15B run; CORPUS: the hand-labelled logs; LOG: the 1M-record Megatron-DeepSpeed log
of the parse benchmark). Matching: a finding matches a label of its kind when their step
ranges overlap within three log intervals; findings overlapping the window of another
incident (a spike's precursor ramp, a collapse, a drift, a divergence, a slowdown) count
neither way; restarts, LR changes and non-finite records explain nothing but their own
kind. Baselines (`bench/baselines.py`) see each launch's loss as a trainer callback
would: llm-foundry (loss >= 2x the mean of the previous 100 records for 5 records),
OLMo-core (loss > mean + 6 sd of the previous 128), Megatron (loss > 10x the largest of
the first 100 records).

Synthetic suite (`bench/gen_detect.py`): 24 incident runs (30k steps at log interval 1,
60k at 5 and 10) over 3 per-step loss-noise levels (log sd 0.005, 0.015, 0.03,
Student-t(4) tails cut at 8 sd) x fp16/bf16 x intervals 1, 1, 5, 10, and 5 healthy runs
(60k-150k steps, one restart each). Injected: 3 loss spikes per run (1.4x-4x as logged,
rise 1-5 steps, decay 3-60 steps; every other one with a precursor ramp of 30-300
steps: grad norm 3-10x, activation norm or attention logit 1.8-3x, or 3-5 loss-scale
halvings),
loss-scale collapses (3-8 halvings in 10-200 steps, a quarter down to scale 1),
activation-norm drifts (2-4x over 100-1000 steps), 2 crashes per run resumed from a
checkpoint (0-600 steps recomputed, 5-60 min gap, half with ECC crash evidence, some
with a manual LR cut), NaN stretches and divergences that end in a rewind, slowdowns;
healthy fp16 dynamics (start-up calibration from 2^32, growth every 1000 quiet steps,
overflows); records aggregated like Megatron's (loss averaged over the interval's
non-skipped iterations, no loss when all were skipped)."""
NOTES = """Notes.
- Precursor lead is counted from the step at which the precursor fired (computed from
  earlier records only) to the spike's onset, not from the back-dated start of the rise.
- The remaining false alarms are single-record grad-norm outliers (5-20x) of the
  heavy-tailed synthetic noise, reported as warnings.
- Corpus misses. `bigscience_tr11_reshaping_restart_universal_ckpt.txt` grad-norm 8.7x at
  94768: that record opens the trajectory; the only earlier values are the same steps
  replayed by other launches (other topologies), which a restart-aware detector does
  not compare with. The loss-scale falls at steps 2-30 of
  `bigscience_full_meg_gpt2_base_n8_dp1_tp4_pp8.log`,
  `megatron_fork_gwda_lib_current_time_field.txt` and
  `megatron_lm_bert_nccl_issue_743_startup_skipped.txt` are the scaler's start-up
  calibration of runs trained from scratch: not findings by design (they are in the
  run's `loss_scale_change` events, 16/16 labelled changes).
- Unlabelled corpus alarms are real: the labels list loss-scale changes, and the files
  with 4-7 halvings within a few records (29k spike, embnorm2, embnorm7) or a scale at
  1.0 (issue 396, issue 33) are collapses; issue 33 ends on a record whose loss field
  vanished (Megatron's NaN record), which is the non-finite divergence rule."""


class Totals:
    """Everything measured over the synthetic suite."""

    def __init__(self) -> None:
        self.ours = {k: Tally() for k in KINDS}
        self.base = {n: Tally() for n in BASELINES}
        self.fa = Counter()
        self.healthy = self.steps = self.records = self.runs = 0
        self.seconds = 0.0


# --jsonl: each run written as a generic metrics JSONL the way many writers do (keys in
# namespaces, null for a NaN, a key left out where there is no value) and read back
JSONL_KEYS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "loss_scale": "train/loss_scale",
    "act_norm": "train/act_norm",
    "attn_logit_max": "model/attn_logit_max",
    "param_norm": "model/param_norm",
}


def through_jsonl(run, folder: Path, name: str):
    """``run``'s records as a generic JSONL (file order, superseded ones included), read
    back with logbook's reader; the run's events with a step are kept (launch markers
    and crash evidence, which such a file would not hold, are not)."""
    import json
    import math

    import parsers

    m = run.metrics.sort(["source", "line"]) if "line" in run.metrics.columns else run.metrics
    cols = [c for c in m.columns if c not in ("segment", "source", "line", "time")]
    path = folder / f"{name}.jsonl"
    with path.open("w") as fh:
        for row in m.select(cols + (["time"] if "time" in m.columns else [])).iter_rows(named=True):
            out = {}
            for k, v in row.items():
                if k == "time":
                    if v is not None:
                        out["time"] = v.timestamp()
                    continue
                if v is None and k == "loss":
                    continue  # no value: the key is left out
                if isinstance(v, float) and not math.isfinite(v):
                    v = None  # JSON has no NaN
                out[JSONL_KEYS.get(k, k)] = v
            fh.write(json.dumps(out) + "\n")
    return parsers.read_log(path, fmt="jsonl")


def evaluate(seed: int = 0, config: dict | None = None, jsonl: bool = False) -> Totals:
    import tempfile

    tot = Totals()
    folder = Path(tempfile.mkdtemp(prefix="eval_jsonl_")) if jsonl else None
    for k, spec in enumerate(suite(seed)):
        run, labels = generate(spec)
        if folder is not None:
            run = through_jsonl(run, folder, f"run{k}")
        t0 = time.perf_counter()
        found = [finding_dict(f) for f in detect(run, config)]
        tot.seconds += time.perf_counter() - t0
        tol = 3 * spec.interval
        steps = run.trajectory().get_column("step")
        tot.healthy += healthy_steps(int(steps.min()), int(steps.max()), labels, tol)
        tot.steps += int(steps.max()) - int(steps.min()) + 1
        tot.records += run.metrics.height
        tot.runs += 1
        for k in KINDS:
            score_kind(tot.ours[k], k, labels, found, tol)
        for f in found:
            if f["severity"] in ALARM and not _overlaps_any(f, labels, tol):
                tot.fa[f["kind"]] += 1
        for name, rule in BASELINES.items():
            score_kind(tot.base[name], "loss_spike", labels, rule(run), tol)
    return tot


def _per10k(n: int, healthy: int) -> str:
    return f"{10_000 * n / healthy:.3f}" if healthy else "-"


def _lead(t: Tally) -> str:
    if not t.leads:
        return "-"
    ratio = statistics.median(a / b for a, b in zip(t.leads, t.ramps, strict=True))
    return f"{statistics.median(t.leads):.0f} steps ({ratio:.2f} of the ramp)"


def report(tot: Totals) -> str:
    out = [
        f"Synthetic suite: {tot.runs} runs, {tot.records:,} records, {tot.steps:,} steps, "
        f"{tot.healthy:,} healthy steps; detection {tot.seconds:.2f} s in all.",
        "",
        "| kind | labels | findings | precision | recall | F1 | false alarms / 10k healthy steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, t in tot.ours.items():
        out.append(
            f"| {k} | {t.labels} | {t.findings} | {t.precision:.3f} | {t.recall:.3f} | "
            f"{t.f1:.3f} | {_per10k(t.false_alarms, tot.healthy)} |"
        )
    all_fa = sum(tot.fa.values())
    detail = ", ".join(f"{k} {n}" for k, n in sorted(tot.fa.items())) or "none"
    out += [
        "",
        f"All false alarms (warning or critical findings of any kind that no label accounts "
        f"for): "
        f"{all_fa} = {_per10k(all_fa, tot.healthy)} per 10k healthy steps ({detail}).",
        "",
    ]
    s = tot.ours["loss_spike"]
    out += [
        f"Precursors: found for {s.pre_found}/{s.with_pre} spikes that have one "
        f"({s.pre_found / max(s.with_pre, 1):.1%}); median lead {_lead(s)}, median injected "
        f"ramp {statistics.median(s.ramps) if s.ramps else 0:.0f} steps; "
        f"{s.spurious_pre}/{s.without_pre} spikes without one got a precursor linked.",
        "",
        "Loss spikes, logbook against the baselines (same runs, same matching):",
        "",
        "| rule | findings | precision | recall | F1 | false alarms / 10k healthy steps |",
        "|---|---|---|---|---|---|",
        _row("logbook loss_spike", s, tot.healthy),
    ]
    out += [_row(name, t, tot.healthy) for name, t in tot.base.items()]
    return "\n".join(out)


def _row(name: str, t: Tally, healthy: int) -> str:
    return (
        f"| {name} | {t.findings} | {t.precision:.3f} | {t.recall:.3f} | {t.f1:.3f} | "
        f"{_per10k(t.false_alarms, healthy)} |"
    )


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace the ``## Detection`` section of RESULTS.md (or append it); its ``###``
    subsections, written by other benchmarks, are kept."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    head, sep, rest = old.partition("\n## Detection\n")
    tail = kept = ""
    if sep:
        nxt = rest.find("\n## ")
        section, tail = (rest[:nxt], rest[nxt:]) if nxt >= 0 else (rest, "")
        sub = section.find("\n### ")
        kept = "\n" + section[sub:].strip("\n") + "\n" if sub >= 0 else ""
    body = head.rstrip("\n") + "\n\n## Detection\n\n" + text.strip() + "\n" + kept + tail
    with atomic_open(path, "w") as fh:
        fh.write(body if body.endswith("\n") else body + "\n")


def seeds_report(seeds: list[int], config: dict) -> str:
    """One line per seed of the suite: the numbers the targets are about."""
    out = [
        "| seed | loss-spike P / R | nonfinite R | restart R | collapse R | false alarms "
        "/ 10k | precursors found | median lead / ramp | F1 logbook / foundry / olmo / megatron |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        t = evaluate(seed, config)
        s = t.ours["loss_spike"]
        lead = statistics.median(a / b for a, b in zip(s.leads, s.ramps, strict=True))
        f1 = " / ".join(f"{x.f1:.2f}" for x in (s, *t.base.values()))
        out.append(
            f"| {seed} | {s.precision:.3f} / {s.recall:.3f} | {t.ours['nonfinite'].recall:.2f} | "
            f"{t.ours['restart'].recall:.2f} | {t.ours['loss_scale_collapse'].recall:.2f} | "
            f"{_per10k(sum(t.fa.values()), t.healthy)} | {s.pre_found}/{s.with_pre} | "
            f"{lead:.2f} | {f1} |"
        )
    return "\n".join(out)


def curve_report(path: Path) -> str:
    """``detect`` on a Megatron golden-values curve (see ``curve_to_jsonl``)."""
    from bench.curve_to_jsonl import golden_frame
    from logbook.run import Run

    run = Run(metrics=golden_frame(path))
    t0 = time.perf_counter()
    found = detect(run)
    took = time.perf_counter() - t0
    counts = Counter(f.severity for f in found)
    return (
        f"Healthy curve `{path.name}`: {run.metrics.height:,} records, steps "
        f"{run.metrics['step'][0]}..{run.metrics['step'][-1]}; findings: "
        f"{counts.get('critical', 0)} critical, {counts.get('warning', 0)} warning, "
        f"{counts.get('info', 0)} info; detection {took:.3f} s."
    )


def speed_report(log: Path | None) -> str:
    """Detection time per 1M records on the synthetic 1M-step run (CPU seconds of this
    process, best of 3, less sensitive than wall time to other load on the machine),
    and, given a large raw log, parse time against detection time on it."""
    from bench.gen_detect import Spec

    spec = Spec(name="speed", seed=7, steps=1_000_000, restarts=3, spikes=5, logs_act=False)
    run, _ = generate(spec)
    lines = [
        f"Speed: synthetic run of {run.metrics.height:,} records (loss, lr, grad norm, loss "
        f"scale, skips, step time; 3 restarts): detection {_cpu(lambda: detect(run)):.3f} CPU s."
    ]
    if log is not None:
        from parsers import read_log

        parse = _cpu(lambda: read_log(log), repeat=2)
        raw = read_log(log)
        took = _cpu(lambda: detect(raw))
        lines.append(
            f"`{log.name}` ({raw.metrics.height:,} records): parse {parse:.2f} CPU s, "
            f"detection {took:.2f} CPU s = {took / parse:.0%} of the parse CPU time (wall "
            "time: `bench.detect_vs_parse`)."
        )
    return "\n".join(lines)


def _cpu(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _arg(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    seed = int(_arg(args, "--seed") or 0)
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    config = build_config(None, sets)
    text = report(evaluate(seed, config, jsonl="--jsonl" in args))
    if _arg(args, "--seeds"):
        text += "\n\n" + seeds_report([int(x) for x in _arg(args, "--seeds").split(",")], config)
    if _arg(args, "--curve"):
        text += "\n\n" + curve_report(Path(_arg(args, "--curve")))
    if "--speed" in args:
        log = _arg(args, "--parse-log")
        text += "\n\n" + speed_report(Path(log) if log else None)
    if _arg(args, "--corpus"):
        from bench._eval_corpus import corpus_report

        text += "\n\n" + corpus_report(Path(_arg(args, "--corpus")))
    print(text)
    if "--write" in args:
        write_section(HEADER + "\n\n" + text + "\n\n" + NOTES)


if __name__ == "__main__":
    main()
