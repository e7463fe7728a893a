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


def _hf(target, temperature: float, assistant=None, pad_id: int = PAD_ID) -> Callable:
    def run(prompts, seed, new_tokens):
        width = max(map(len, prompts))
        ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
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
                                      min_new_tokens=new_tokens, pad_token_id=pad_id,
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


def build_methods(target, draft, ks: list[int], temperature: float, pad_id: int = PAD_ID,
                  assisted: bool = True) -> list[Method]:
    """Every method of the side-by-side table (HF assisted generation only with ``assisted``)."""
    methods = [Method("ours plain", "ours-plain", 0, _ours(Engine(target), temperature)),
               Method("HF generate", "hf-plain", 0, _hf(target, temperature, pad_id=pad_id))]
    for k in ks:
        methods.append(Method(f"ours draft k={k}", "ours-draft", k,
                              _ours(Engine(target, DraftModel(draft), num_draft_tokens=k), temperature)))
    for k in ks:
        methods.append(Method(f"ours n-gram k={k}", "ours-ngram", k,
                              _ours(Engine(target, NgramDrafter(), num_draft_tokens=k), temperature)))
    for k in ks if assisted else ():
        assistant = _assistant(copy.deepcopy(draft), k)
        methods.append(Method(f"HF assisted k={k}", "hf-assisted", k, _hf(target, temperature, assistant),
                              batch_sizes=(1,)))
    # auto considers only the k whose costs the benchmark measures (c and v(k) for k <= max(ks))
    auto = Engine(target, DraftModel(draft), config=EngineConfig(num_draft_tokens="auto", max_draft_tokens=max(ks)))
    methods.append(Method("ours draft k=auto", "ours-auto", -1, _ours(auto, temperature), engine=auto))
    return methods


@dataclass
class RealPair:
    """The target/draft pair of ``bench generate --pair smollm2``: the same fields the tiny pair has."""

    target: object
    draft: object
    path: str
    meta: dict
    prompts: list[list[int]]
    pad_id: int


def load_smollm2_pair() -> RealPair:
    """SmolLM2-135M-Instruct, its distilled shortlist draft, and 64 chat prompts that ask for a short
    explanation (rendered by its template; other questions than the draft was distilled on)."""
    import json
    import random

    from trajkit.models.chat import render
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.models.shortlist import ShortlistLM
    from trajkit.recipes.prepared import DRAFT_NAME, PREPARE
    from trajkit.recipes.smollm2 import NAME

    folder, draft_folder = PREPARE[NAME](), PREPARE[DRAFT_NAME]()
    tok = load_tokenizer(folder)
    rng = random.Random(12345)
    forms = ["Explain step by step how to compute {a} * {b}.", "What is {a} + {b}? Explain your reasoning.",
             "Write a short paragraph about the number {a}.", "How many minutes are in {a} hours? Show the steps."]
    prompts = [tok.encode(render(tok, [{"role": "user", "content": rng.choice(forms).format(
        a=rng.randint(2, 99), b=rng.randint(2, 99))}], add_generation_prompt=True), add_special_tokens=False)
        for _ in range(64)]
    target, draft = load_model(folder).eval(), ShortlistLM.from_pretrained(draft_folder).eval()
    meta = json.loads((draft_folder / "meta.json").read_text())
    return RealPair(target, draft, str(draft_folder), {"target_parameters": meta["target_parameters"],
                                                      "draft_parameters": meta["draft_parameters"]},
                    prompts, tok.pad_token_id)
