"""Its rubric raises (``env error``: the episode is unscorable)."""
import verifiers.v1 as vf
from vf_sum import SumConfig, SumTask, SumTaskset


class CrashTask(SumTask):
    @vf.reward(weight=1.0)
    async def exact_sum(self, trace: vf.Trace) -> float:
        raise RuntimeError("grader crashed")


class CrashTaskset(vf.Taskset[CrashTask, SumConfig]):
    def load(self):
        for t in SumTaskset(self.config).load():
            yield CrashTask(t.data, self.config.task)


__all__ = ["CrashTaskset"]
