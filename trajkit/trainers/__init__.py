"""trajkit.trainers: the trainers layer, above :mod:`trajkit.rl` and the environments. Nothing in ``rl``,
``envs``, ``traces`` or below imports it; the CLI, the benchmarks and the demos do.

- :mod:`~trajkit.trainers.sft`: ``trainer: sft``, the supervised warm start of the agentic loop (task
  families -> Oracle traces -> the checked token export -> fine-tuning with its loss -> held-out eval);
- :mod:`~trajkit.trainers.door`: the one trainer door, ``trainer_for(cfg)``: SFT, in process, FSDP or Ray, for
  ``trajkit train``, ``trajkit bench train`` and the demos;
- :mod:`~trajkit.trainers.phases`: the resumable phases of such a pipeline (one JSON record per folder; a rerun
  under the same config resumes after the last finished phase), also used by ``trajkit demo agent``.

The RL trainers are :class:`trajkit.rl.Trainer` (in process) and :class:`trajkit.cluster.trainer.ClusterTrainer`
(Ray); the one supervised loop, which the SFT trainer shares with the recipes, is :func:`trajkit.models.fit.fit`.
"""
