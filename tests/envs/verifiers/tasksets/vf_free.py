"""Pays every reply, an empty one included (``vacuous``)."""
import verifiers.v1 as vf
from vf_sum import SumConfig, SumTask, SumTaskset


class FreeTask(SumTask):
    @vf.reward(weight=1.0)
    async def exact_sum(self, trace: vf.Trace) -> float:
        return 1.0


class FreeTaskset(vf.Taskset[FreeTask, SumConfig]):
    def load(self):
        for t in SumTaskset(self.config).load():
            yield FreeTask(t.data, self.config.task)


__all__ = ["FreeTaskset"]
