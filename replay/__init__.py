"""The replay engine: a small transformer trained bitwise-reproducibly on CPU, to record,
rewind, replay and change one thing at a time (``logbook replay``).

Modules: ``model`` (the transformer and its instrumentation), ``data`` and ``text`` (the
batch of step k as a pure function of (seed, k): real text or generated phrases, and
pathological batches), ``presets`` (named recipes), ``optim`` (LR schedule, fp16
loss-scaling emulation), ``engine`` (the training step and its log), ``checkpoint``,
``recording`` (record and verify), ``interventions``, ``experiment`` and ``report``
(counterfactuals), ``segment``, ``segment_run``, ``fidelity`` and ``calibrate`` (a real
run's segment mapped onto the small model, and whether it reproduces the real
instability).

torch is imported by these modules; ``logbook``'s core never imports them.
"""
