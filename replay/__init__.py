"""The replay engine: a small transformer trained bitwise-reproducibly on CPU, to record,
rewind, replay and change one thing at a time (``logbook replay``).

Modules: ``model`` (the transformer and its instrumentation), ``data`` (the batch of step
k as a pure function of (seed, k)), ``optim`` (LR schedule, fp16 loss-scaling emulation),
``engine`` (the training step and its log), ``checkpoint``, ``recording`` (record and
verify), ``interventions``, ``experiment`` and ``report`` (counterfactuals), ``segment``
and ``segment_run`` (a real run's segment mapped onto the small model).

torch is imported by these modules; ``logbook``'s core never imports them.
"""
