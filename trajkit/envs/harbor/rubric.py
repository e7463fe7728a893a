"""The rubric reward of NVIDIA Polar's ``harbor_rubric``: the outcome plus a judge's score.

``reward = outcome + 0.2 * score / 5`` with ``score`` in ``[-5, 5]``: an OpenAI-compatible judge reads the
task's ``tests/rubric.md``, its instruction and the agent's output, and ends its reply with ``SCORE: <n>``.
When the judge fails (the task has no rubric, the request fails, the reply holds no score, or the score is
outside ``[-5, 5]``) the reward is the outcome alone, and the reason is kept. The prompt is our own.

>>> polar_reward(1.0, 5.0), polar_reward(0.0, -2.5), polar_reward(1.0, None)
(1.2, -0.1, 1.0)
>>> parse_score("Clean and correct.\\nSCORE: 4"), parse_score("no idea"), parse_score("SCORE: 9")
(4.0, None, None)
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

from trajkit.envs.harbor.task import HarborTask

WEIGHT = 0.2
SCALE = 5.0
JUDGE_SYSTEM = ("You grade an agent's work on a task against a rubric. Explain briefly, then end with one line "
                "'SCORE: <n>' where n is a number from -5 (violates the rubric) to 5 (meets it fully).")
SCORE = re.compile(r"SCORE:\s*(-?\d+(?:\.\d+)?)")


def polar_reward(outcome: float, score: float | None) -> float:
    """``outcome + WEIGHT * score / SCALE``; the outcome when there is no score."""
    return outcome if score is None else round(outcome + WEIGHT * score / SCALE, 12)


def parse_score(reply: str) -> float | None:
    """The last ``SCORE: n`` of the reply, or None when there is none or it is outside ``[-5, 5]``."""
    found = SCORE.findall(reply or "")
    if not found:
        return None
    value = float(found[-1])
    return value if -SCALE <= value <= SCALE else None


def judge_messages(task: HarborTask, rubric: str, agent_output: str) -> list[dict]:
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"# Task\n{task.instruction.strip()}\n\n# Rubric\n{rubric.strip()}\n\n"
                                        f"# Agent output\n{agent_output.strip()[-4000:] or '(none)'}"}]


@dataclass
class ChatModel:
    """An OpenAI-compatible chat endpoint (``base_url`` ends in ``/v1``)."""

    base_url: str
    model: str = "judge"
    api_key: str = "judge"
    timeout_s: float = 120.0

    def reply(self, messages: list[dict]) -> str:
        response = httpx.post(f"{self.base_url.rstrip('/')}/chat/completions", timeout=self.timeout_s,
                              headers={"Authorization": f"Bearer {self.api_key}"},
                              json={"model": self.model, "messages": messages, "temperature": 0.0})
        response.raise_for_status()
        return response.json()["choices"][0]["message"].get("content") or ""


@dataclass
class RubricResult:
    reward: float
    outcome: float
    score: float | None
    fallback: str | None  # why the outcome alone was used (None when the judge scored)


def rubric_reward(task: HarborTask, outcome: float, agent_output: str, judge: ChatModel) -> RubricResult:
    """Polar's rubric reward for one trial (module docstring)."""
    path = task.tests_dir / "rubric.md"
    if not path.is_file():
        return RubricResult(outcome, outcome, None, "the task has no tests/rubric.md")
    try:
        reply = judge.reply(judge_messages(task, path.read_text(encoding="utf-8"), agent_output))
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        return RubricResult(outcome, outcome, None, f"the judge failed: {type(exc).__name__}: {exc}")
    score = parse_score(reply)
    if score is None:
        return RubricResult(outcome, outcome, None, f"no SCORE in [-5, 5] in the judge's reply: {reply[-200:]!r}")
    return RubricResult(polar_reward(outcome, score), outcome, score, None)
