"""Host synchronisations of the samplers, counted on the CPU: every device-to-host read made by the engine's
own code (``tolist``, ``item``, ``bool``, ``int``, ``float``, ``nonzero``) and every ``to_host`` transfer,
by the function that makes it. A speculative round makes two (``draft`` reads the proposal lengths,
``commit`` reads the verification results); a plain step makes one."""
from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest
import torch

import trajkit.engine.plain as plain
import trajkit.engine.speculative as speculative
from tests.engine.helpers import target_model
from trajkit.engine import Engine, Proposal, SamplingParams

ENGINE_DIR = Path(speculative.__file__).parent
SAMPLER_FILES = {str(ENGINE_DIR / f"{name}.py") for name in ("speculative", "plain", "active", "kvstate", "cache",
                                                             "kernel", "warp", "rng")}
READS = ("tolist", "item", "__bool__", "__int__", "__float__", "__index__", "nonzero")


class DeviceDrafter:
    """Proposes ``k`` random tokens per row computed on the device (no host reads of its own)."""

    calls, seconds = 0, 0.0

    def __init__(self, vocab_size: int):
        self.vocab = vocab_size

    def vocab_size(self):
        return None

    def begin(self, prompts):
        pass

    def propose(self, seqs, k, warp, u):
        tokens = (u * self.vocab).long()  # [B, k]
        return Proposal(tokens, None, torch.full((len(seqs),), k, dtype=torch.long, device=u.device))

    def retain(self, keep):
        pass


@pytest.fixture
def syncs(monkeypatch):
    """Counter of host reads by the engine function making them."""
    counts = collections.Counter()

    def counting(name, original):
        def wrapper(*args, **kwargs):
            frame = sys._getframe(1)
            if frame.f_code.co_filename in SAMPLER_FILES:
                counts[frame.f_code.co_name] += 1
            return original(*args, **kwargs)
        return wrapper

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counting(name, getattr(torch.Tensor, name)))
    for module in (plain, speculative):
        monkeypatch.setattr(module, "to_host", counting("to_host", module.to_host))
    return counts


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_round_reads_the_host_twice(syncs, k):
    model = target_model(seed=7, dtype=torch.float64)
    params = SamplingParams(temperature=1.0, max_new_tokens=25, seed=0)
    out = Engine(model, DeviceDrafter(model.config.vocab_size), num_draft_tokens=k).generate([[1, 2, 3]], params)
    rounds = out.stats.target_calls - 1  # minus the prefill
    assert 0 < out.stats.accepted and rounds < 25
    assert dict(syncs) == {"draft": rounds, "commit": rounds, "extend": 1}  # extend: the ragged prefill


def test_speculative_rows_leaving_add_only_the_compaction_check(syncs):
    model = target_model(seed=7, dtype=torch.float64)
    params = [SamplingParams(temperature=1.0, max_new_tokens=n, seed=0) for n in (5, 17, 40)]
    out = Engine(model, DeviceDrafter(model.config.vocab_size), num_draft_tokens=2).generate([[1, 2, 3], [4], [5, 6]], params)
    rounds = out.stats.target_calls - 1
    assert syncs.pop("draft") == rounds and syncs.pop("commit") == rounds and syncs.pop("extend") == 1
    assert 1 <= syncs.pop("compact") <= 2 * 2  # two rows left before the last: lengths.max(), slots.all()
    assert not syncs


def test_plain_step_reads_the_host_once(syncs):
    model = target_model(seed=7, dtype=torch.float64)
    out = Engine(model).generate([[1, 2, 3]], SamplingParams(temperature=1.0, max_new_tokens=20, seed=0))
    assert out.stats.target_calls == 20  # prefill + 19 steps; 20 tokens sampled
    assert dict(syncs) == {"generate_plain": 20, "extend": 1}
