"""trajkit.envs: every environment, below the trainer (``rl`` imports ``envs``, never the reverse).

- the :class:`~trajkit.envs.base.Task` and :class:`~trajkit.envs.base.Environment` protocols and the
  :class:`~trajkit.envs.base.Prompt` record (:mod:`~trajkit.envs.base`);
- the single-turn tasks (:mod:`~trajkit.envs.single_turn`), datasets of prompts (:mod:`~trajkit.envs.data`),
  reward functions (:mod:`~trajkit.envs.rewards`) and the rollout record :class:`~trajkit.envs.sample.Sample`;
- the Hermes tool-use env (:mod:`~trajkit.envs.toolenv`) and its calculator (:mod:`~trajkit.envs.calculator`);
- the agent env: a harness run against a gateway (:mod:`~trajkit.envs.agent`);
- ``task.name`` -> task factory (:mod:`~trajkit.envs.registry`);
- Harbor-format environments in :mod:`trajkit.envs.harbor` (task folders, sandboxes, trials, ``trajkit envs
  check``/``compile``, ``task.name=harbor``); the shipped Harbor task folders are ``trajkit/envs/tasks/``.

See docs/envs.md and docs/rl.md.
"""
