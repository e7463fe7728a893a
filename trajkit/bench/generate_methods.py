"""The generation methods ``trajkit bench generate`` compares; each returns one timed ``Run``.

A method is ``run(prompts, seed, new_tokens) -> Run``. Ours go through ``trajkit.engine.Engine``;
the baselines call transformers' ``generate`` directly: plain sampling, and assisted generation
(speculative sampling with the same draft model) configured as the issue asks -- constant schedule of
``k`` assistant tokens, confidence threshold 0 (no early stop of the draft) and ``top_k=0`` (HF's
default sampling would otherwise truncate to the top 50). HF assisted generation refuses batches above 1.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from trajkit.engine import (
    DraftModel,
    Engine,
    EngineConfig,
    NgramDrafter,
    SamplingParams,
)
from trajkit.models.tokenizer import PAD_ID


@dataclass
class Run:
    seconds: float
    new_tokens: int
    stats: dict = field(default_factory=dict)  # GenerationStats.to_dict() for ours


@dataclass
class Method:
    name: str
    family: str  # ours-plain | ours-draft | ours-ngram | ours-auto | hf-plain | hf-assisted
    k: int
    run: Callable[[list[list[int]], int, int], Run]
    batch_sizes: tuple[int, ...] = (1, 8)
    engine: Engine | None = None  # ours: the engine the method runs


def _ours(engine: Engine, temperature: float) -> Callable:
    def run(prompts, seed, new_tokens):
        params = SamplingParams(temperature=temperature, max_new_tokens=new_tokens, seed=seed)
        start = time.perf_counter()
        out = engine.generate(prompts, params)
        return Run(time.perf_counter() - start, sum(len(c.token_ids) for c in out), out.stats.to_dict())
    return run


def _hf(target, temperature: float, assistant=None) -> Callable:
    def run(prompts, seed, new_tokens):
        width = max(map(len, prompts))
        ids = torch.tensor([[PAD_ID] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} \
            if temperature > 0 else {"do_sample": False}
        calls = [0]
        hook = target.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        torch.manual_seed(seed)
        try:
            start = time.perf_counter()
            with torch.inference_mode():
                out = target.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                                      min_new_tokens=new_tokens, pad_token_id=PAD_ID,
                                      assistant_model=assistant, **sampling)
            seconds = time.perf_counter() - start
        finally:
            hook.remove()
        return Run(seconds, int(out[:, width:].numel()), {"target_calls": calls[0]})
    return run


def _assistant(draft, k: int):
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    return draft


def build_methods(target, draft, ks: list[int], temperature: float) -> list[Method]:
    """Every method of the side-by-side table."""
    methods = [Method("ours plain", "ours-plain", 0, _ours(Engine(target), temperature)),
               Method("HF generate", "hf-plain", 0, _hf(target, temperature))]
    for k in ks:
        methods.append(Method(f"ours draft k={k}", "ours-draft", k,
                              _ours(Engine(target, DraftModel(draft), num_draft_tokens=k), temperature)))
    for k in ks:
        methods.append(Method(f"ours n-gram k={k}", "ours-ngram", k,
                              _ours(Engine(target, NgramDrafter(), num_draft_tokens=k), temperature)))
    for k in ks:
        assistant = _assistant(copy.deepcopy(draft), k)
        methods.append(Method(f"HF assisted k={k}", "hf-assisted", k, _hf(target, temperature, assistant),
                              batch_sizes=(1,)))
    # auto considers only the k whose costs the benchmark measures (c and v(k) for k <= max(ks))
    auto = Engine(target, DraftModel(draft), config=EngineConfig(num_draft_tokens="auto", max_draft_tokens=max(ks)))
    methods.append(Method("ours draft k=auto", "ours-auto", -1, _ours(auto, temperature), engine=auto))
    return methods
