"""trajkit.envs: Harbor-format environments. Task folders (:mod:`~trajkit.envs.task`), sandboxes behind one
interface (:mod:`~trajkit.envs.sandbox`; the daemon-less :mod:`~trajkit.envs.nsbox`, :mod:`~trajkit.envs.docker`),
trials (:mod:`~trajkit.envs.trial`), ``trajkit envs check`` (:mod:`~trajkit.envs.check`), the rubric reward
(:mod:`~trajkit.envs.rubric`), ``trajkit envs compile`` (:mod:`~trajkit.envs.compile`) and ``task.name=harbor`` (:mod:`~trajkit.envs.rltask`). See docs/envs.md."""
