"""Trajectories from solutions: each task's Oracle command replayed through the shell agent's protocol in a real
trial, recorded as an ordinary trace (an OpenAI chat row that ``trajkit traces stats/report/export`` read).

The conversation is exactly what :mod:`trajkit.envs.harbor.shell_agent` would have seen had the model written the
Oracle's command:

1. ``system``: the shell agent's :data:`~trajkit.envs.harbor.shell_agent.SYSTEM` prompt; ``user``: the instruction;
2. ``assistant``: the command as one fenced ``bash`` block;
3. ``user``: ``exit code: N`` and the command's output (its last ``MAX_OUTPUT`` characters), as the agent
   writes it; the command runs with ``sh -c`` in the task's workdir of a fresh sandbox, as the agent runs it;
4. ``assistant``: :data:`CLOSING`, a reply without a block, which ends the agent's run.

Then the task's verifier runs as in any trial. A run is **kept** only when the verifier pays 1 on every
reward key; it is **dropped** and counted when the trial failed (``error``), the command exited non-zero
(``exit code``), the reward was below 1 (``wrong``), or the task's Oracle is not one command we can replay
(``no command``: no ``solution/solve.sh``). The command is ``solve.sh`` without its ``#!`` line and
``set -e``: a solution that relies on files under ``/solution`` other than itself is not replayable and
shows up as ``wrong`` or ``exit code``.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from trajkit.envs.harbor.evaluate import family_of
from trajkit.envs.sandbox.base import Sandbox
from trajkit.envs.harbor.shell_agent import SYSTEM
from trajkit.envs.harbor.task import HarborTask, read_text
from trajkit.envs.harbor.trial import AgentResult, run_trial

CLOSING = "Done."
MAX_OUTPUT = 2000  # the shell agent's default --max-output


def oracle_command(task: HarborTask) -> str | None:
    """``solution/solve.sh`` as one shell command (no ``#!`` line, no ``set -e``), or None."""
    if task.solution_dir is None:
        return None
    lines = read_text(task.solution_dir / "solve.sh").splitlines()
    body = [ln for ln in lines if not ln.startswith("#!") and ln.strip() not in ("set -e", "set -eu", "set -euo pipefail")]
    text = "\n".join(body).strip()
    return text or None


@dataclass
class Replay:
    """The replayed conversation of one task (built while its trial runs)."""

    task: HarborTask
    command: str
    messages: list[dict] = field(default_factory=list)
    exit_code: int | str | None = None

    def agent(self, task: HarborTask, box: Sandbox) -> AgentResult:
        result = box.exec(self.command + "\n", timeout_s=min(30.0, task.agent.timeout_sec))
        self.exit_code = "timeout" if result.timed_out else result.exit_code
        output = (result.stdout + result.stderr)[-MAX_OUTPUT:]
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.instruction},
                         {"role": "assistant", "content": f"```bash\n{self.command}\n```"},
                         {"role": "user", "content": f"exit code: {self.exit_code}\n{output}"},
                         {"role": "assistant", "content": CLOSING}]
        return AgentResult([result], result.stdout + result.stderr)


def replay(task: HarborTask, sandbox: str = "namespace") -> tuple[dict | None, str]:
    """(the trace row, "kept") or (None, why it was dropped)."""
    command = oracle_command(task)
    if command is None:
        return None, "no command"
    run = Replay(task, command)
    result = run_trial(task, run.agent, "oracle-replay", sandbox)
    if result.error:
        return None, "error"
    if run.exit_code != 0:
        return None, "exit code"
    if not result.rewards or min(result.rewards.values()) < 1.0:
        return None, "wrong"
    return {"id": task.name, "messages": run.messages, "category": family_of(task), "task": task.name,
            "reward": result.reward}, "kept"


def oracle_traces(tasks: Sequence[HarborTask], jobs: int = 4, sandbox: str = "namespace"
                  ) -> tuple[list[dict], Counter]:
    """Every task's replayed Oracle run -> (kept rows, in task order; counts by outcome)."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda t: replay(t, sandbox), tasks))
    return [row for row, _ in outcomes if row is not None], Counter(why for _, why in outcomes)


def write_rows(rows: Sequence[dict], path) -> None:
    from trajkit.atomic import write_atomic

    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
