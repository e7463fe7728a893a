"""OpenEnv environments in trajkit: trained on (``task.name=openenv``, :mod:`.rltask`) and checked
(``trajkit envs check --openenv``, :mod:`.check`).

- :mod:`.connect`: an episode's connection, the environment in process or a local server's ``/ws``;
- :mod:`.episode`: the adapter (observation -> user turn, reply -> action) and the episode loop;
- :mod:`.examples`: two small offline environments (single-step ``SumEnv``, multi-step ``GuessEnv``) with
  their reference policies; :mod:`.server`: OpenEnv's own app for a class on a loopback port.

Nothing here imports ``openenv`` at package import: ``openenv.core`` loads fastmcp at module load (and gradio
with its web UI), so it is imported only by the modules that use it, when a run chooses them.
"""
