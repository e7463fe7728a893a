"""``task.name=harbor``: RL on Harbor tasks, each episode one trial whose agent runs through the gateway.

Prompt ``i`` draws one task of the folder (``task.path``) from ``(seed, i)``; the trainer repeats it ``G`` times
(a group). Eval prompt ``i`` is task ``i`` (sorted by name) of ``task.eval_path`` (held-out tasks, e.g.
``trajkit envs generate --split heldout``), else of ``task.path``. An episode is
:func:`trajkit.envs.harbor.trial.run_trial` with the built-in shell agent
(:mod:`trajkit.envs.harbor.shell_agent`, ``task.harbor.max_turns`` replies) inside a fresh sandbox, its model endpoint the
gateway over the trainer's engine (:class:`trajkit.envs.agent.GatewayEnv`: every request sampled at the trainer's
temperature and seeded from the step's seed), reached through the sandbox's relay. So:

- the **samples** are the gateway's token-exact stitched chains of the run's calls (``loss_mask`` 1 on the
  sampled ids, engine log-probs there; 0 on the shell output and template glue between them);
- the **reward** is the trial's (:func:`trial_reward`: ``reward`` of the verifier's reward file);
- a trial that failed by the agent's or the task's doing (``TrialResult.cause`` ``"agent"``/``"task"``: the
  agent's or the verifier's time limit, outputs the verifier cannot read, a reward file missing, malformed,
  non-finite or outside ``[verifier] reward_range``) scores the task's minimum (0 for a binary reward): a
  policy that cannot solve a task gains nothing by timing out or breaking the verifier;
- only an **infrastructure failure** (``cause == "infra"``: the sandbox could not start, the host or the
  sandbox failed) and a run that never finished are masked: the reward is None, i.e. unscorable
  (``reward/unscorable`` in the step's metrics, advantage 0, left out of its group's baseline), and
  ``env/failed`` counts them (:func:`trajkit.rl.scoring.env_failure`); a run whose agent made no call at all
  is an empty sample. More than ``rollout.max_env_failed`` of a step's trials failing so stops the run with an
  error naming the first cause (a sandbox that does not start is no policy learning nothing).

With a judge (``task.harbor.judge_url``, ``task.harbor.judge_model``: any OpenAI-compatible endpoint) a successful trial's
reward is Polar's rubric reward (:mod:`trajkit.envs.harbor.rubric`: outcome + 0.2 * score / 5 from ``tests/rubric.md``,
the outcome alone when the judge fails). Each sample's ``metadata["columns"]["harness_output"]`` holds the
trial's record as JSON (reward, rewards, error, failed phase, per-phase seconds; outcome, judge_score and
judge_fallback with a judge). ``task.harbor.timeout_multiplier`` scales every task's agent time limit (training and
held-out trials alike, as ``trajkit envs eval --timeout-multiplier`` does): on a slow or shared CPU a policy's
answers must not become agent timeouts, i.e. masked trials.
"""
from __future__ import annotations

import json
import warnings

from trajkit.envs.harbor.agents import shell_agent
from trajkit.envs.harbor.rubric import ChatModel, rubric_reward
from trajkit.envs.harbor.task import load_tasks, scale_agent_timeouts
from trajkit.envs.harbor.trial import run_trial
from trajkit.errors import ConfigError
from trajkit.models.chat import render
from trajkit.envs.agent import GatewayEnv, HarnessRun, gateway_config
from trajkit.envs.base import ENDLESS, Prompt, encode, rng_for


def trial_reward(completions, harness_output, **kwargs) -> list[float | None]:
    """The trial's reward (a failed trial's is the task's minimum, as :func:`run_trial` records it); None
    (unscorable: masked) for an infrastructure failure or a run that never finished."""
    out = []
    for text in harness_output:
        record = json.loads(text) if text else None
        out.append(None if record is None or record.get("cause") == "infra" else float(record["reward"]))
    return out


class HarborRLTask:
    """The Harbor tasks under ``path`` as an RL task (module docstring)."""

    name = "harbor"

    def __init__(self, path: str, tokenizer, seed: int = 0, max_turns: int = 4, sandbox: str = "namespace",
                 strict: bool = False, gateway=None, judge: ChatModel | None = None, eval_path: str | None = None,
                 timeout_multiplier: float = 1.0):
        train = _load(path, strict, "task.path", timeout_multiplier)
        held = _load(eval_path, strict, "task.eval_path", timeout_multiplier) if eval_path else {}
        if clash := sorted(set(train) & set(held)):
            raise ConfigError(f"task.eval_path: {len(clash)} task name(s) also in task.path (first {clash[0]!r}); "
                              "held-out tasks must be other tasks")
        self.tasks = {**train, **held}
        self.names = sorted(train)
        self.eval_names = sorted(held) or self.names
        self.seed, self.tokenizer, self.max_turns, self.sandbox = seed, tokenizer, max_turns, sandbox
        self.judge = judge
        self.env = GatewayEnv(tokenizer, self.episode, config=gateway, raise_when_all_fail=False, name=self.name)
        self.reward_funcs = [trial_reward]

    def prompt(self, index: int, split: str = "train") -> Prompt:
        name = self.eval_names[index % len(self.eval_names)] if split == "eval" else \
            rng_for(self.seed, index, split).choice(self.names)
        messages = [{"role": "user", "content": self.tasks[name].instruction}]
        text = render(self.tokenizer, messages, add_generation_prompt=True)
        return Prompt(text, encode(self.tokenizer, text), index, {"harbor_task": name}, source=messages)

    def num_prompts(self, split: str) -> int:
        return len(self.eval_names) if split == "eval" else ENDLESS

    def episode(self, run: HarnessRun) -> str:
        """One trial of the run's task with the shell agent on the run's gateway session -> its record (JSON)."""
        task = self.tasks[run.columns["harbor_task"]]
        agent = shell_agent(run.base_url, run.api_key, run.model, self.max_turns)
        result = run_trial(task, agent, "shell", self.sandbox)
        record = result.to_dict()
        if self.judge is not None and result.ok:
            rubric = rubric_reward(task, result.reward, result.agent_result.output, self.judge)
            record.update(reward=rubric.reward, outcome=rubric.outcome, judge_score=rubric.score,
                          judge_fallback=rubric.fallback)
        return json.dumps(record)


def _load(path: str, strict: bool, key: str, timeout_multiplier: float) -> dict:
    report = load_tasks(path, strict=strict)
    if report.errors:
        warnings.warn(f"{len(report.errors)} task(s) under {path} skipped; first: {report.errors[0]}", stacklevel=3)
    if not report.tasks:
        raise ConfigError(f"{key}: no usable Harbor task under {path}")
    return {t.name: t for t in scale_agent_timeouts(report.tasks, timeout_multiplier)}


def make_task(cfg, seed: int, tokenizer) -> HarborRLTask:
    """The ``harbor`` entry of :data:`trajkit.envs.registry.TASKS`."""
    o = cfg.options
    judge = ChatModel(o.judge_url, o.judge_model) if o.judge_url else None
    return HarborRLTask(cfg.path, tokenizer, seed, o.max_turns, o.sandbox, cfg.strict, gateway=gateway_config(o),
                        judge=judge, eval_path=cfg.eval_path, timeout_multiplier=o.timeout_multiplier)
