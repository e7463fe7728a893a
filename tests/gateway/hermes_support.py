"""The Hermes Agent (0.19.0, in its own virtualenv) as a test harness, and the tiny model that makes it call.

How the tiny model is made to call ``terminal`` reliably (docs/gateway.md tells the same):

1. **Capture what the agent really sends.** The agent runs once against the gateway over a
   :class:`ReplayEngine` that answers with fixed text: a ``terminal`` call, then a final answer. The agent
   executes the call and sends its second request; that request's messages (its ~11K-character system
   prompt, the task, the assistant turn *as the agent sends it back* and the tool result) plus the final
   answer are the script. The first reply is therefore exactly the render of the message the agent returns
   (no reasoning, arguments as the agent re-serialises them), so the next prompt extends the sampled ids
   and the session stitches into one chain.
2. **Canonicalise** the volatile parts (date, working directory, host, home, tool call ids) so that the
   script, and the cache key hashed from it, is the same on every run of the same agent version.
3. **Fine-tune** a tiny model on the script with those parts redrawn at random every step
   (:func:`perturb`, :func:`trajkit.recipes.scripted.scripted_model`), over a BPE vocabulary trained on the
   script (about 2.5K tokens instead of 11K bytes). The build checks greedy decoding on a perturbation it
   never saw and is cached; the gateway samples greedily (``force_temperature=0``).
"""
from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
from pathlib import Path

from trajkit.backends.base import Capabilities, Guarantees
from trajkit.engine.types import Completion
from trajkit.gateway import Gateway, GatewayConfig, running
from trajkit.recipes.cache import cache_dir

DRIVER = Path(__file__).with_name("hermes_driver.py")
AGENT_VENV = "hermes-agent-0.19.0"
COMMAND = "echo hello | tee hello.txt"  # leaves a file behind: proof that the agent ran it
TASK = f"Run `{COMMAND}` in the terminal and tell me what it printed."
CALL_TEXT = '<tool_call>\n{"name": "terminal", "arguments": {"command": "' + COMMAND + '"}}\n</tool_call>'
FINAL = {"role": "assistant", "content": "The command printed: hello", "reasoning_content": "It printed hello."}
FINAL_TEXT = "<think>\nIt printed hello.\n</think>\n\nThe command printed: hello"
PERTURB_NAME = "hermes-0.19.0-env-lines-v1"

# "key: value" lines of the agent's system prompt that depend on the machine, the folder and the day
VOLATILE = re.compile(r"^(Host|User home directory|Current working directory|Conversation started): (.*)$", re.MULTILINE)
PROFILES = re.compile(r"live under (\S+)/profiles/")


def agent_python() -> Path:
    return cache_dir() / AGENT_VENV / "bin" / "python"


def run_agent(url: str, session: str, model: str, task: str, cwd: Path, timeout: float = 300):
    """Run the agent's conversation on ``task`` in ``cwd`` (also its ``HERMES_HOME``)."""
    return subprocess.run([str(agent_python()), str(DRIVER), url, session, model, task], cwd=cwd,
                          env={**os.environ, "HERMES_HOME": str(cwd)}, capture_output=True, text=True,
                          timeout=timeout, check=False)


class ReplayEngine:
    """A backend stand-in that answers call ``i`` of the server with ``replies[i]`` (then the last again); it
    declares no optional part (whole generate calls, no prefix cache)."""

    name, policy_version, num_params, engine = "replay", 0, 0, None
    guarantees = Guarantees(exact_logprobs=False, deterministic=True, logprob_atol=0.0)
    capabilities = Capabilities()
    context_window, generation_config = 1 << 16, None

    def __init__(self, tokenizer, replies: list[str]):
        self.tokenizer, self.replies, self.calls = tokenizer, replies, 0
        self.vocab_size = len(tokenizer)

    def generate(self, prompts, params):
        out = []
        for _ in prompts:
            text = self.replies[min(self.calls, len(self.replies) - 1)] + self.tokenizer.eos_token
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            out.append(Completion(ids, [0.0] * len(ids), "stop"))
            self.calls += 1
        return out


def capture_script(tokenizer, workdir: Path) -> tuple[list[dict], list[dict]]:
    """The agent's second request (after one replayed ``terminal`` call) + :data:`FINAL`, canonicalised;
    and its tools. Raises AssertionError with the agent's stderr when it did not get that far."""
    gateway = Gateway(ReplayEngine(tokenizer, [CALL_TEXT, FINAL_TEXT]), tokenizer, GatewayConfig(model_name="tiny"))
    with running(gateway) as url:  # (the replay engine's window, 65536, is one the agent takes)
        proc = run_agent(url, "capture", "tiny", TASK, workdir)
    gateway.close()
    records = gateway.sessions.find("capture").records if gateway.sessions.find("capture") else []
    assert proc.returncode == 0 and len(records) == 2, proc.stderr[-2000:]
    second = records[1]
    return canonical(list(second.messages) + [FINAL]), second.tools


def canonical(messages: list[dict]) -> list[dict]:
    """``messages`` with the volatile system-prompt values and tool call ids fixed."""
    out = []
    for m in messages:
        m = json.loads(json.dumps(m))
        if m["role"] == "system":
            m["content"] = _set_env(m["content"], {"Host": "Linux", "User home directory": "/home/agent",
                                                   "Current working directory": "/work",
                                                   "Conversation started": "Monday, January 1, 2024"}, "/work")
        for k, call in enumerate(m.get("tool_calls") or []):
            call["id"] = f"call_{k}"
        if m["role"] == "tool":
            m["tool_call_id"] = "call_0"
        out.append(m)
    return out


def _set_env(text: str, values: dict[str, str], profiles: str) -> str:
    text = VOLATILE.sub(lambda g: f"{g.group(1)}: {values[g.group(1)]}", text)
    return PROFILES.sub(f"live under {profiles}/profiles/", text)


def _path(rng: random.Random) -> str:
    chars = string.ascii_lowercase + string.digits + "_-"
    return "/" + "/".join("".join(rng.choice(chars) for _ in range(rng.randint(3, 14)))
                          for _ in range(rng.randint(1, 5)))


def _date(rng: random.Random) -> str:
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    months = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December"]
    return f"{rng.choice(days)}, {rng.choice(months)} {rng.randint(1, 31)}, {rng.randint(2024, 2035)}"


def perturb(messages: list[dict], rng: random.Random) -> list[dict]:
    """The system prompt's machine/folder/day values redrawn at random (see the module docstring)."""
    cwd = _path(rng)
    host = f"{rng.choice(['Linux', 'Darwin', 'FreeBSD'])} ({rng.randint(3, 7)}.{rng.randint(0, 30)}." \
           f"{rng.randint(0, 200)}-{''.join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(0, 8)))})"
    values = {"Host": host, "User home directory": _path(rng), "Current working directory": cwd,
              "Conversation started": _date(rng)}
    return [{**m, "content": _set_env(m["content"], values, cwd)} if m["role"] == "system" else m
            for m in messages]
