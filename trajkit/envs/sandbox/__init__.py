"""trajkit.envs.sandbox: where untrusted commands run. The seam (:mod:`~trajkit.envs.sandbox.base`: the
``Sandbox`` protocol, ``Limits``, ``SandboxSpec``, ``ExecResult``), its backends by name
(:mod:`~trajkit.envs.sandbox.registry`: ``namespace``, ``docker``), the daemon-less namespace sandbox
(:mod:`~trajkit.envs.sandbox.namespace`) with its launcher (``launch.c``/:mod:`~trajkit.envs.sandbox.launch`,
chosen and built by :mod:`~trajkit.envs.sandbox.launcher`), slots (:mod:`~trajkit.envs.sandbox.slots`), a task's
network (:mod:`~trajkit.envs.sandbox.netns`) and the relay to the gateway (:mod:`~trajkit.envs.sandbox.relay`);
the Docker backend (:mod:`~trajkit.envs.sandbox.docker`). Harbor trials (:mod:`trajkit.envs.harbor`) run in it.
The trust boundaries it enforces are docs/envs.md's threat model."""
