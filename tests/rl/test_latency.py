"""The long-tailed episode wait: a lognormal with the configured median, seeded per episode, the batch
waiting for its slowest episode."""
import math
import random
import statistics

from trajkit.envs.latency import LatencyEnv, episode_latency
from trajkit.envs.sample import Sample
from trajkit.envs.base import Prompt


def test_lognormal_median_and_spread():
    waits = [episode_latency(7, i, r, 0.5, 1.2) for i in range(400) for r in range(4)]
    logs = [math.log(w) for w in waits]
    assert abs(statistics.median(waits) / 0.5 - 1) < 0.1  # 1600 draws: the median within 10%
    assert abs(statistics.stdev(logs) - 1.2) < 0.06
    z = random.Random("latency:7:3:1").gauss(0.0, 1.0)  # the stream named in the docstring
    assert episode_latency(7, 3, 1, 0.5, 1.2) == 0.5 * math.exp(1.2 * z)


class _Inner:
    def rollout(self, generate, prompts, params):
        return [Sample([1], [2], [-0.1], [1]) for _ in prompts]


def test_the_batch_waits_for_its_slowest_episode():
    slept = []
    env = LatencyEnv(_Inner(), seed=3, median_s=0.1, sigma=2.0, sleep=slept.append)
    prompts = [Prompt("a", [1], index=i) for i in (5, 5, 6, 6)]
    samples = env.rollout(None, prompts, None)
    expected = [episode_latency(3, 5, 0, 0.1, 2.0), episode_latency(3, 5, 1, 0.1, 2.0),
                episode_latency(3, 6, 0, 0.1, 2.0), episode_latency(3, 6, 1, 0.1, 2.0)]
    assert [s.metadata["latency_s"] for s in samples] == expected
    assert slept == [max(expected)]


def test_a_wrapped_agent_task_pickles_for_the_ray_workers():
    """A Ray run ships a given task to its rollout workers by pickling: the wrapper survives (unpickling must
    not recurse through ``__getattr__``) and the gateway environment arrives without a running server."""
    import pickle

    from tests.envs.test_agent import ROWS, two_turns
    from trajkit.envs.agent import AgentTask
    from trajkit.envs.latency import LatencyEnv, LatencyTask
    from trajkit.models.tokenizer import byte_tokenizer

    task = AgentTask(ROWS, byte_tokenizer(), two_turns)
    copy = pickle.loads(pickle.dumps(LatencyTask(task, LatencyEnv(task.env, 3, 0.5, 1.0))))
    assert isinstance(copy.env, LatencyEnv) and (copy.env.seed, copy.env.median_s) == (3, 0.5)
    assert copy.env.serves_generation and copy.env.inner.gateway is None and copy.name == "agent"
    assert copy.prompt(1).text == task.prompt(1).text
