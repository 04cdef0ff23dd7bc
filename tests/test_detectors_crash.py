"""``crash``: a run that ends in crash evidence with no restart after it."""

from __future__ import annotations

import parsers
from logbook.detectors import detect

NANO = "".join(f"iter {i}: loss {4 - i / 100:.4f}, time 31.00ms, mfu 11.00%\n" for i in range(5))


def crashes(tmp_path, text: str, name: str = "run.log"):
    path = tmp_path / name
    path.write_text(text)
    return [f for f in detect(parsers.read_log(path)) if f.kind == "crash"]


def test_oom_after_the_last_record_is_a_critical_crash(tmp_path):
    text = NANO + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    (f,) = crashes(tmp_path, text)
    assert (f.severity, f.step, f.evidence["cause"], f.evidence["line"]) == (
        "critical",
        4,
        "oom",
        6,
    )
    assert f.message == "run ended after step 4: oom (run.log:6)"


def test_evidence_that_records_follow_is_no_crash(tmp_path):
    text = NANO[:90] + "RuntimeError: CUDA error: an illegal memory access\n" + NANO[90:]
    assert crashes(tmp_path, text) == []


def test_a_restart_after_the_evidence_makes_it_the_restarts_cause(tmp_path):
    (tmp_path / "a.log").write_text(NANO + "Segmentation fault (core dumped)\n")
    again = "".join(f"iter {i}: loss 3.9000, time 31.00ms, mfu 11.00%\n" for i in range(3, 6))
    (tmp_path / "b.log").write_text("Resuming training from out\n" + again)
    run = parsers.read_log([tmp_path / "a.log", tmp_path / "b.log"])
    found = detect(run)
    assert [f.kind for f in found if f.kind == "crash"] == []
    (restart,) = [f for f in found if f.kind == "restart"]
    assert (restart.severity, restart.evidence["cause"]) == ("warning", "segfault")


def test_an_interrupt_is_a_stop_not_a_failure(tmp_path):
    text = NANO + "^C\nKeyboardInterrupt\n"
    (f,) = crashes(tmp_path, text)
    assert (f.severity, f.evidence["cause"]) == ("warning", "interrupted")
    assert f.message.startswith("run stopped after step 4: interrupted")


def test_a_loss_that_stopped_the_script(tmp_path):
    text = (
        "Epoch: [0]  [ 0/60]  eta: 0:02:14  lr: 0.000359  loss: 3.0239 (3.0239)  time: 2.2\n"
        "Epoch: [0]  [10/60]  eta: 0:00:57  lr: 0.003745  loss: 3.0239 (2.9495)  time: 1.1\n"
        "Epoch: [0]  [20/60]  eta: 0:00:43  lr: 0.007132  loss: 2.6232 (2.4223)  time: 1.0\n"
        "Loss is nan, stopping training\n"
    )
    (f,) = crashes(tmp_path, text)
    assert (f.severity, f.step, f.evidence["cause"]) == ("critical", 20, "nonfinite_loss")


def test_a_crash_at_start_up_has_no_step(tmp_path):
    text = (
        "using world size: 8, data-parallel-size: 8, tensor-model-parallel size: 1\n"
        "> initializing torch distributed ...\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error\n"
    )
    (f,) = crashes(tmp_path, text)
    assert (f.severity, f.step, f.evidence["cause"]) == ("critical", None, "nccl_error")
    assert f.message == "run ended before any record: nccl_error (run.log:3)"


def test_a_traceback_cut_before_its_exception_line(tmp_path):
    text = NANO + (
        'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n    main()\n'
    )
    (f,) = crashes(tmp_path, text)
    assert (f.evidence["cause"], f.evidence["line"]) == ("exception", 6)


def test_time_limit_kill_and_planned_exit(tmp_path):
    killed = NANO + "=>> PBS: job killed: walltime 604842 exceeded limit 604800\n"
    (f,) = crashes(tmp_path, killed)
    assert f.evidence["cause"] == "time_limit"
    planned = NANO + "[exiting program after 1190.03 minutes] datetime: 2021-08-08 01:00:51\n"
    assert crashes(tmp_path, planned, "planned.log") == []


def test_fail_on_warning_fails_a_log_that_only_shows_a_crash(tmp_path):
    from typer.testing import CliRunner

    from logbook.cli import _register, app

    _register()
    path = tmp_path / "oom.log"
    path.write_text(
        "using world size: 8, data-parallel-size: 8, tensor-model-parallel size: 1\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n"
    )
    res = CliRunner().invoke(app, ["detect", str(path), "--fail-on", "warning"])
    assert res.exit_code == 1, res.output
    assert res.output.splitlines()[1:] == [
        "verdict: damaged: 1 critical incident(s) (crash before any step)",
        "critical                -  crash (oom) before any record, line 2",
        "1 finding(s): 1 critical, 0 warning, 0 info",
    ]


def test_a_crash_is_after_the_last_record_written_not_the_largest_step(tmp_path):
    # a second launch from step 0 that is cancelled at 300, after a first one reached 900
    path = tmp_path / "x.log"
    text = "".join(f"step {s} | loss {3 - s / 1000:.3f}\n" for s in (700, 800, 900))
    text += "".join(f"step {s} | loss {3 - s / 1000:.3f}\n" for s in (100, 200, 300))
    text += "slurmstepd: error: *** JOB 334949 ON node17 CANCELLED AT 2025-01-01T10:00:00 ***\n"
    path.write_text(text)
    runs = parsers.read_logs(path)
    crash = [f for r in runs for f in detect(r) if f.kind == "crash"]
    assert [(f.step, f.evidence["cause"]) for f in crash] == [(300, "cancelled")]
    assert crash[0].message.startswith("run stopped after step 300: cancelled")


def test_torchruns_teardown_sigterm_is_not_the_cause_of_a_ranks_exception(tmp_path):
    path = tmp_path / "x.log"
    text = "".join(f"step {s} | loss {3 - s / 1000:.3f}\n" for s in (100, 200, 300))
    text += (
        "W0504 16:15:15.474000 427 torch/distributed/elastic/multiprocessing/api.py:897] "
        "Sending process 427490 closing signal SIGTERM\n"
        "RuntimeError: Cannot send a request, as the client has been closed.\n"
    )
    path.write_text(text)
    (run,) = parsers.read_logs(path)
    (crash,) = [f for f in detect(run) if f.kind == "crash"]
    assert crash.evidence["cause"] == "exception"
    assert crash.evidence["causes"] == ["exception", "sigterm"]
