"""Agents that reach a model: the built-in shell agent (:mod:`trajkit.envs.harbor.shell_agent`) run inside the sandbox
against an OpenAI-compatible endpoint on the host's loopback (trajkit's gateway), through the sandbox's relay
(``expose``) instead of a network."""
from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from trajkit.envs.harbor import shell_agent as shell_module
from trajkit.envs.sandbox.base import Sandbox, SandboxError
from trajkit.envs.harbor.task import HarborTask
from trajkit.envs.harbor.trial import Agent, AgentResult

AGENT_DIR = "/installed-agent"


def shell_agent(base_url: str, api_key: str, model: str, max_turns: int = 4, command_timeout_s: float = 30.0) -> Agent:
    """An agent running ``shell_agent.py`` in the sandbox within ``[agent] timeout_sec``; ``base_url`` must be
    on the host's loopback (``http://127.0.0.1:PORT/v1``)."""
    url = urlsplit(base_url)
    if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
        raise SandboxError(f"shell agent: {base_url!r} is not a loopback http://127.0.0.1:PORT/... address; the "
                           "sandbox reaches only the host's loopback, through its relay")

    def run(task: HarborTask, box: Sandbox) -> AgentResult:
        expose = getattr(box, "expose", None)
        if expose is None:
            raise SandboxError(f"{type(box).__name__} cannot forward the model endpoint into the sandbox")
        inside = expose(url.port)
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(shell_module.__file__, Path(tmp) / "shell_agent.py")
            (Path(tmp) / "instruction.md").write_text(task.instruction, encoding="utf-8")
            box.upload(Path(tmp), AGENT_DIR)
        command = (f"python3 {AGENT_DIR}/shell_agent.py --base-url http://{inside}{url.path} "
                   f"--api-key={shlex.quote(api_key)} "
                   f"--model '{model}' --task {AGENT_DIR}/instruction.md --max-turns {max_turns} "
                   f"--command-timeout {command_timeout_s:g}")
        result = box.exec(command, timeout_s=task.agent.timeout_sec)
        summary = {}
        if result.ok and result.stdout.strip():
            summary = json.loads(result.stdout.strip().splitlines()[-1])
        return AgentResult([result], result.stdout + result.stderr, extra=summary)
    run.__name__ = "shell"
    return run
