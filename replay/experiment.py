"""Counterfactuals: from a recorded checkpoint, run each variant with several seeds.

Seeds: the first seed is the recording's own, so the baseline with it replays the
recording exactly. What another seed ``s`` changes is ``vary``: ``data`` (default) the
data order of the steps after the checkpoint (``data_seed:s``: "same state, other
batches?"); ``init`` the model's initialisation (trained from step 0 on the recording's
batches, the variant's changes from the checkpoint's step on: "another run like it?");
``both`` init and data order. A variant with ``qk_norm`` changes the architecture, so it
trains from step 0 (with ``data``: init and data order both from the seed).

Every job writes a complete run (for checkpoint variants: the recording up to the
checkpoint, then the replay) to ``OUT/runs/VARIANT-seedS.jsonl``, which ``logbook
detect`` reads like any other run. Jobs run in separate processes (``jobs``), each on
its config's thread count, so the results do not depend on ``jobs``.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import deque
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from logbook.errors import UsageError
from logbook.run import Run
from replay.checkpoint import CheckpointDir, trainer_from
from replay.config import ReplayConfig
from replay.engine import Trainer
from replay.findings import spikes_in
from replay.interventions import Intervention, Plan
from replay.recording import read_recording

FINAL_WINDOW = 10  # final loss = mean of the last this many logged steps


@dataclass(kw_only=True)
class Job:
    root: str
    out: str
    variant: str
    plan: list[dict]
    seed: int
    from_step: int
    until: int
    vary: str = "data"


VARY = ("data", "init", "both")


@dataclass(kw_only=True)
class Outcome:
    """One job's numbers over the compared window (from_step, until]."""

    variant: str
    seed: int
    final_loss: float | None
    max_loss: float | None
    spike: bool
    spike_step: int | None
    precursors: list[str]
    max_attn_logit: float | None
    steps_lost: int
    run_file: str
    from_step: int = 0  # the window starts after it (time to spike counts from it)
    vary: str = "data"  # what the seeds vary: data (order after the checkpoint), init, both


def run_job(job: Job) -> Outcome:
    """Run one (variant, seed) and summarize it (module-level: picklable for workers)."""
    root = Path(job.root)
    recording = read_recording(root)
    state = CheckpointDir(root).load(job.from_step)
    plan = Plan.from_list(job.plan)
    name = f"{job.variant}-seed{job.seed}"
    if plan.qk_norm or job.vary != "data":
        # from step 0: an architecture change, or seeds that vary the initialisation
        cfg = ReplayConfig.from_dict(state["config"])
        first = cfg.train.seed
        cfg.train.seed = job.seed
        items = Plan.from_list(state["plan"]).items + plan.resolved(job.from_step + 1).items
        if job.vary == "init" and job.seed != first:  # the recording's batches throughout
            items.append(Intervention(kind="data_seed", value=first, start=1))
        trainer = Trainer(cfg, Plan(items), name=name)
        trainer.run(job.until)
        run = trainer.to_run()
    else:
        items = Plan.from_list(state["plan"]).items + plan.resolved(job.from_step + 1).items
        if job.seed != state["data"]["seed"]:
            items.append(Intervention(kind="data_seed", value=job.seed, start=job.from_step + 1))
        trainer = trainer_from(state, Plan(items), name=name)
        trainer.run(job.until)
        run = with_prefix(recording, trainer.to_run(), job.from_step)
    path = Path(job.out) / "runs" / f"{name}.jsonl"
    run.write(path)
    rel = str(path.relative_to(job.out))
    out = summarize(run, job.variant, job.seed, job.from_step, job.until, rel)
    out.vary = job.vary
    return out


def with_prefix(recording: Run, replayed: Run, from_step: int) -> Run:
    """The recording up to ``from_step`` followed by the replay: one complete timeline."""
    head = recording.metrics.filter(pl.col("step") <= from_step)
    metrics = pl.concat([head, replayed.metrics], how="diagonal_relaxed")
    events = [e for e in recording.events if e.step is not None and e.step <= from_step]
    return Run(metrics=metrics, events=events + replayed.events, meta=replayed.meta)


def summarize(
    run: Run,
    variant: str,
    seed: int,
    after: int,
    until: int,
    run_file: str,
    spikes_after: int | None = None,
) -> Outcome:
    """The outcome over steps ``after+1 .. until`` of the run's trajectory; spikes are
    counted from ``spikes_after`` (default ``after``) on."""
    window = run.trajectory().filter((pl.col("step") > after) & (pl.col("step") <= until))
    loss = window.get_column("loss")
    lost = sum(
        (e.end_step - e.start_step + 1)
        for e in run.events_of("data_skip")
        if e.start_step is not None and e.start_step > after
    )
    lost += sum(
        e.lost_steps or 0 for e in run.events_of("restart") if e.step is not None and e.step > after
    )
    if "skipped" in window.columns:
        lost += int(window.get_column("skipped").fill_null(0).sum())
    report = spikes_in(run, after=after if spikes_after is None else spikes_after, until=until)
    return Outcome(
        variant=variant,
        seed=seed,
        final_loss=_mean(loss.tail(FINAL_WINDOW)),
        max_loss=_max(loss),
        spike=report.present,
        spike_step=report.first_step,
        precursors=report.precursor_kinds(),
        max_attn_logit=_max(window.get_column("attn_logit_max")),
        steps_lost=lost,
        run_file=run_file,
        from_step=after,
    )


def _mean(s: pl.Series) -> float | None:
    s = s.drop_nulls()
    return float(s.mean()) if s.len() else None


def _max(s: pl.Series) -> float | None:
    s = s.drop_nulls()
    return float(s.max()) if s.len() else None


def plan_jobs(
    root: str | Path,
    out: str | Path,
    variants: list[tuple[str, Plan]],
    from_step: int,
    until: int,
    seeds: int,
    vary: str = "data",
) -> list[Job]:
    """The jobs of a counterfactual, checked against the recording. ``vary``: what the
    seeds after the first change: ``data`` (the batches after the checkpoint: same
    state, other data), ``init`` (the initialisation: trained from step 0 on the
    recording's batches, the variant applied after ``from_step``) or ``both``."""
    names = [n for n, _ in variants]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"variant names must be unique: {', '.join(dupes)}")
    if seeds < 1:
        raise UsageError("--seeds must be >= 1")
    if vary not in VARY:
        raise UsageError(f"--vary {vary!r}: expected one of {', '.join(VARY)}")
    if until <= from_step:
        raise UsageError(f"--until {until} must be after --from {from_step}")
    state = CheckpointDir(root).load(from_step)  # fails early when there is none
    first = int(state["data"]["seed"])
    return [
        Job(
            root=str(root),
            out=str(out),
            variant=name,
            plan=plan.to_list(),
            seed=first + i,
            from_step=from_step,
            until=until,
            vary=vary,
        )
        for name, plan in variants
        for i in range(seeds)
    ]


def pool_map(fn, jobs: list, workers: int = 1, cost=None, ray: str | None = None) -> list:
    """``fn`` over all jobs on ``workers`` processes (this one plus ``workers - 1`` spawned
    ones), or as tasks on Ray when ``ray`` is an address (``""``: found or started, see
    ``logbook.executor``); results in job order. With ``cost(job)``, the costliest jobs
    start first (less idle time at the end). ``fn`` must be a module-level function.
    Workers are spawned, not forked: a forked copy of a process that holds torch's thread
    pools can hang."""
    if workers < 1:
        raise UsageError("--jobs must be >= 1")
    order = list(range(len(jobs)))
    if cost is not None:
        order.sort(key=lambda i: -cost(jobs[i]))
    if ray is not None:
        from logbook.executor import ray_map

        done = ray_map(fn, [jobs[i] for i in order], ray, cpus=workers)
        results = dict(zip(order, done, strict=True))
        return [results[i] for i in range(len(jobs))]
    if workers == 1 or len(jobs) <= 1:
        return [fn(j) for j in jobs]
    return _shared_pool(fn, jobs, order, workers - 1)


def _shared_pool(fn, jobs: list, order: list[int], spawned: int) -> list:
    """Jobs taken in ``order`` by this process and ``spawned`` worker processes."""
    pending, lock = deque(order), threading.Lock()
    results: dict[int, object] = {}
    futures: dict = {}
    errors: list[BaseException] = []

    def take() -> int | None:
        with lock:
            return pending.popleft() if pending else None

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(spawned, len(jobs)), mp_context=ctx) as pool:

        def submit(_done=None) -> None:  # a worker is free: give it the next job
            i = take()
            if i is None:
                return
            try:
                future = pool.submit(fn, jobs[i])
            except BaseException as exc:  # a broken pool: report it, do not lose the job
                errors.append(exc)
                return
            futures[future] = i
            future.add_done_callback(submit)

        for _ in range(min(spawned, len(jobs))):
            submit()
        try:
            while (i := take()) is not None:  # this process works too
                results[i] = fn(jobs[i])
            while len(results) + len(futures) < len(jobs) or not all(f.done() for f in futures):
                failed = [f.exception() for f in list(futures) if f.done() and f.exception()]
                if errors or failed:
                    raise (errors + failed)[0]
                wait(list(futures), timeout=1.0)
        except BaseException:
            with lock:
                pending.clear()  # no new jobs for the workers: fail fast
            raise
        results.update({i: f.result() for f, i in list(futures.items())})
    return [results[i] for i in range(len(jobs))]


def _steps(job: Job) -> int:
    """Steps a job trains: from step 0 for an architecture change or another init, else
    from the checkpoint."""
    scratch = Plan.from_list(job.plan).qk_norm or job.vary != "data"
    return job.until - (0 if scratch else job.from_step)


def run_jobs(jobs: list[Job], workers: int = 1, ray: str | None = None) -> list[Outcome]:
    return pool_map(run_job, jobs, workers, cost=_steps, ray=ray)


def counterfactual(
    root: str | Path,
    out: str | Path,
    variants: list[tuple[str, Plan]],
    from_step: int,
    until: int,
    seeds: int = 5,
    workers: int = 1,
    vary: str = "data",
    ray: str | None = None,
) -> tuple[list[Outcome], str]:
    """Run the variants x seeds (on ``workers`` processes, or on Ray at ``ray``), write
    the runs, ``table.md``, ``results.json`` and ``comparison.png`` under ``out``; return
    the outcomes and the markdown table."""
    from replay.report import figure, write_tables

    jobs = plan_jobs(root, out, variants, from_step, until, seeds, vary)
    outcomes = run_jobs(jobs, workers, ray)
    varied = {"data": "data order", "init": "initialisation", "both": "init and data"}[vary]
    title = f"counterfactual from step {from_step} to {until}, {seeds} seed(s) varying {varied}"
    text = write_tables(outcomes, Path(out), f"# {Path(root).name}: {title}")
    figure(outcomes, Path(out), from_step, until, title)
    return outcomes, text


def outcome_dicts(outcomes: list[Outcome]) -> list[dict]:
    return [asdict(o) for o in outcomes]
