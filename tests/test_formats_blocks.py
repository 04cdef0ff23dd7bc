"""Records printed as blocks of one key a line (rsl_rl, Coqui TTS, Ray Tune, DeepRM),
one metric a line with its step (TensorFlowTTS), and the other readings added with
them: each read to exact values."""

from __future__ import annotations

import math

import parsers
from tests._cli import invoke
from tests._rows import column as _col
from tests._rows import one_run as _one

RSL_RL = """\
################################################################################
                          Learning iteration 0/10

                            Total steps: 256
                        Mean value loss: 19.7410
                    Mean surrogate loss: -0.0013
                        Mean action std: 0.93
--------------------------------------------------------------------------------
                         Iteration time: 1.01s
                           Time elapsed: 00:00:01

################################################################################
                          Learning iteration 1/10

                            Total steps: 512
                        Mean value loss: 19.6685
                    Mean surrogate loss: -0.0076
                        Mean action std: 0.88
--------------------------------------------------------------------------------
                         Iteration time: 0.16s
                           Time elapsed: 00:00:01
Traceback (most recent call last):
RuntimeError: CUDA error: an illegal memory access was encountered
"""


def test_rsl_rl_blocks_are_records_at_their_headers_iteration(tmp_path, monkeypatch, capsys):
    p = tmp_path / "train.log"
    p.write_text(RSL_RL)
    assert parsers.sniff(p) == "kv-blocks"
    run = _one(p)
    assert _col(run, "step") == [0, 1]
    assert _col(run, "mean_value_loss") == [19.741, 19.6685]
    assert _col(run, "mean_surrogate_loss") == [-0.0013, -0.0076]
    assert _col(run, "total_steps") == [256.0, 512.0]
    assert _col(run, "iteration_time") == [1.01, 0.16]
    assert "time_elapsed" not in run.metrics.columns  # (00:00:01 is no number)
    assert [e.cause for e in run.events_of("hardware_failure")] == ["cuda_error"]
    code, out, _ = invoke(monkeypatch, capsys, "parse", str(p))
    assert code == 0
    # 2 headers; 12 key lines and the traceback's first; its error; rules, blank lines
    assert "23 lines = 2 record + 1 event + 13 continuation + 7 ignored + 0 unrecognized" in out


COQUI = """\
 > Training Environment:
 | > Current device: 0
 | > Num. of GPUs: 1
 | > Num. of CPUs: 2

\x1b[4m\x1b[1m > EPOCH: 0/1000\x1b[0m

\x1b[1m   --> STEP: 24/36 -- GLOBAL_STEP: 1000025\x1b[0m
     | > loss_disc: 2.40120  (2.51074)
     | > loss_gen: 2.45456  (2.27450)
     | > amp_scaler: 1024.00000  (2176.00000)
     | > current_lr_0: 0.00018\x20

\x1b[1m > EVALUATION \x1b[0m

  \x1b[1m--> EVAL PERFORMANCE\x1b[0m
     | > avg_loss_disc: 2.30001
     | > avg_loss_gen: 2.10002

\x1b[1m   --> STEP: 13/36 -- GLOBAL_STEP: 1000050\x1b[0m
     | > loss_disc: 2.31000  (2.50000)
     | > loss_gen: 2.44000  (2.27000)
     | > amp_scaler: 512.00000  (1536.00000)
     | > current_lr_0: 0.00018\x20
"""


def test_coqui_blocks_take_the_global_step_and_evaluations_are_validations(tmp_path):
    p = tmp_path / "trainer_0_log.txt"
    p.write_text(COQUI)
    assert parsers.sniff(p) == "kv-blocks"
    run = _one(p)
    # (the start-up dump of settings is no record; the running averages are left out)
    assert _col(run, "step") == [1000025, 1000050]
    assert _col(run, "loss_disc") == [2.4012, 2.31]
    assert _col(run, "amp_scaler") == [1024.0, 512.0]
    (val,) = run.events_of("validation")
    assert val.step == 1000025
    assert val.values == {"avg_loss_disc": 2.30001, "avg_loss_gen": 2.10002}


DEEPRM = """\
Iteration: \t 0
NumTrajs: \t 200
Loss:     \t 0.1269
MeanRew: \t -257.43 +- 63.18
MeanEntropy \t 2.397886
Elapsed time\t 106.06 seconds
-----------------
Iteration: \t 1
NumTrajs: \t 200
Loss:     \t 0.1925
MeanRew: \t -261.04 +- 57.66
MeanEntropy \t 2.3972197
Elapsed time\t 98.67 seconds
-----------------
"""


def test_blocks_without_headers_split_where_a_key_comes_again(tmp_path):
    p = tmp_path / "log.txt"
    p.write_text(DEEPRM)
    assert parsers.sniff(p) == "kv-blocks"
    run = _one(p)
    assert _col(run, "step") == [0, 1]
    assert _col(run, "loss") == [0.1269, 0.1925]
    assert _col(run, "meanrew") == [-257.43, -261.04]  # (the +- std left out)
    assert _col(run, "meanentropy") == [2.397886, 2.3972197]  # (a tab, no colon)
    assert _col(run, "elapsed_time") == [106.06, 98.67]


TUNE = """\
Result for DQN_env_00000:
  custom_metrics: {}
  done: false
  info:
    learner:
      default_policy:
        learner_stats:
          cur_lr: 0.0005
          grad_gnorm: 51.5
        td_error:
        - 3.0
        - -2.0
  training_iteration: 320
  episode_reward_mean: 0.5

Result for DQN_env_00000:
  custom_metrics: {}
  done: false
  info:
    learner:
      default_policy:
        learner_stats:
          cur_lr: 0.0005
          grad_gnorm: 8.0e6
        td_error:
        - 1.0
  training_iteration: 324
  episode_reward_mean: 0.25
"""


def test_ray_tune_results_nest_their_keys_and_take_training_iteration(tmp_path):
    p = tmp_path / "nohup.out"
    p.write_text(TUNE)
    assert parsers.sniff(p) == "kv-blocks"
    run = _one(p)
    assert _col(run, "step") == [320, 324]
    assert _col(run, "info_learner_default_policy_learner_stats_grad_gnorm") == [51.5, 8.0e6]
    assert _col(run, "episode_reward_mean") == [0.5, 0.25]


def test_an_excerpt_cut_inside_a_block_takes_the_step_before_the_first_header(tmp_path):
    cut = RSL_RL.split("                          Learning iteration 0/10\n\n", 1)[1]
    p = tmp_path / "train.log"
    p.write_text(cut)
    assert _col(_one(p), "step") == [0, 1]


def test_a_config_printed_once_is_not_a_block_log(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "lr: 0.001\nbatch_size: 32\nwarmup: 100\n"
        + "".join(f"step {i} loss {5 - i * 0.1:.2f} lr 0.001\n" for i in range(1, 6))
    )
    assert parsers.sniff(p) != "kv-blocks"


def test_one_metric_a_line_with_its_step_is_one_record_a_step(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "2020-09-10 11:52:14,447 (base_trainer:831) INFO: (Step: 95400) train_f0_loss = 0.0659.\n"
        "2020-09-10 11:52:14,448 (base_trainer:831) INFO: (Step: 95400) train_mel_loss = nan.\n"
        "2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: 95400) train_dur_loss = 0.03.\n"
        "2020-09-10 11:53:14,447 (base_trainer:831) INFO: (Step: 95600) train_f0_loss = 0.0601.\n"
        "2020-09-10 11:53:14,448 (base_trainer:831) INFO: (Step: 95600) train_mel_loss = 0.5.\n"
        "2020-09-10 11:53:14,449 (base_trainer:831) INFO: (Step: 95600) train_dur_loss = 0.02.\n"
    )
    run = _one(p)
    assert _col(run, "step") == [95400, 95600]
    assert _col(run, "train_f0_loss") == [0.0659, 0.0601]
    mel = _col(run, "train_mel_loss")
    assert math.isnan(mel[0]) and mel[1] == 0.5
    assert _col(run, "line") == [1, 4]
    assert run.meta.parse[0].continuation_lines == 4


YOLO = """\
      0/29     1.86G   0.09854   0.09318         0    0.1917        24       416         0         0  0.004895 0.0009547   0.09176   0.05526         0
      1/29     1.93G   0.09296    0.1009         0       nan        37       416   0.04823   0.01505  0.007566  0.001351    0.0922   0.05528         0
      2/29     1.93G    0.0913    0.1026         0    0.1939        39       416   0.05829   0.04946   0.01947  0.004119    0.0968   0.05152         0
Traceback (most recent call last):
"""  # noqa: E501


def test_yolo_results_txt_rows_are_epochs_with_their_columns(tmp_path):
    p = tmp_path / "results.txt"
    p.write_text(YOLO)
    assert parsers.sniff(p) == "yolo-results"
    run = _one(p)
    assert _col(run, "step") == [0, 1, 2]
    loss = _col(run, "loss")
    assert loss[0] == 0.1917 and math.isnan(loss[1]) and loss[2] == 0.1939
    assert _col(run, "box_loss") == [0.09854, 0.09296, 0.0913]
    assert _col(run, "img_size") == [416.0] * 3
    assert _col(run, "map50_95") == [0.0009547, 0.001351, 0.004119]
    assert _col(run, "gpu_mem_gb") == [1.86, 1.93, 1.93]
    assert [e.step for e in run.events_of("nonfinite")] == [1]
    assert run.meta.parse[0].event_lines == 1  # (the traceback: crash evidence)
