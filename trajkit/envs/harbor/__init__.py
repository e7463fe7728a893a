"""trajkit.envs.harbor: Harbor-format environments. Task folders (:mod:`~trajkit.envs.harbor.task`), sandboxes behind
one interface (:mod:`~trajkit.envs.sandbox.base`; the daemon-less :mod:`~trajkit.envs.sandbox.namespace`,
:mod:`~trajkit.envs.sandbox.docker`), trials (:mod:`~trajkit.envs.harbor.trial`), ``trajkit envs check``
(:mod:`~trajkit.envs.harbor.check`), the rubric reward (:mod:`~trajkit.envs.harbor.rubric`), ``trajkit envs compile``
(:mod:`~trajkit.envs.harbor.compile`) and ``task.name=harbor`` (:mod:`~trajkit.envs.harbor.rltask`). See docs/envs.md."""

from trajkit._lazy import moved_modules

# the SFT trainer and its resumable records lived here; they are the trainers layer's now (docs/architecture.md)
moved_modules({"trajkit.envs.harbor.sft": "trajkit.trainers.sft",
               "trajkit.envs.harbor.stages": "trajkit.trainers.phases"})
