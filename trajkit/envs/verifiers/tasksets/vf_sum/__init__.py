"""``vf-sum``: a small offline ``verifiers.v1`` taskset (trajkit's example; runs in the verifiers venv).

Task ``i`` asks for ``A + B`` with ``A, B`` drawn from 1..9 by ``random.Random(i)`` (so the same task on every
run, no data files, no network). The rubric (``@vf.reward exact_sum``) pays 1 when the **last integer** of the
model's final reply is the sum, else 0: the working may come before the answer, a second candidate may not
follow it (a reply listing many numbers does not pay unless the sum is the last). A metric
(``@vf.metric has_number``) records whether the reply had any integer. Bounded: ``size`` tasks (default 64).
"""
import random
import re
from collections.abc import Iterator

from pydantic import Field

import verifiers.v1 as vf

SYSTEM_PROMPT = "Answer with the number only."
INT = re.compile(r"-?\d+")


def last_int(text: str) -> int | None:
    found = INT.findall(text or "")
    return int(found[-1]) if found else None


def final_reply(trace) -> str:
    replies = trace.assistant_messages
    return (replies[-1].content or "") if replies else ""


class SumConfig(vf.TasksetConfig):
    size: int = Field(64, ge=1)
    """How many tasks."""


class SumData(vf.TaskData):
    a: int
    b: int


class SumTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def exact_sum(self, trace: vf.Trace) -> float:
        return 1.0 if last_int(final_reply(trace)) == self.data.a + self.data.b else 0.0

    @vf.metric
    async def has_number(self, trace: vf.Trace) -> float:
        return 0.0 if last_int(final_reply(trace)) is None else 1.0


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> Iterator[SumTask]:
        for i in range(self.config.size):
            rng = random.Random(i)
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            yield SumTask(SumData(prompt=f"What is {a} + {b}?", system_prompt=SYSTEM_PROMPT, a=a, b=b),
                          self.config.task)


__all__ = ["SumTaskset"]
