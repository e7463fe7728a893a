"""The generation methods ``trajkit bench generate`` compares; each returns one timed ``Run``.

A method is ``run(prompts, seed, new_tokens) -> Run``. Ours go through ``trajkit.engine.Engine``;
the baselines call transformers' ``generate`` directly: plain sampling, and assisted generation
(speculative sampling with the same draft model) configured to match trajkit's speculative arm -- constant schedule of
``k`` assistant tokens, confidence threshold 0 (no early stop of the draft) and ``top_k=0`` (HF's
default sampling would otherwise truncate to the top 50). HF assisted generation refuses batches above 1.
The EAGLE-style head (``ours eagle``) has no HF counterpart (assisted generation needs a draft *model*).
With ``--vllm`` (SmolLM2): vLLM plain and vLLM n-gram at batch 1 (:func:`vllm_methods`).
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
from trajkit.engine.drafters.eagle import EagleDrafter
from trajkit.models.tokenizer import PAD_ID


@dataclass
class Run:
    seconds: float
    new_tokens: int
    stats: dict = field(default_factory=dict)  # GenerationStats.to_dict() for ours


@dataclass
class Method:
    name: str
    # ours-plain | ours-draft | ours-ngram | ours-auto | ours-eagle | ours-eagle-auto | hf-plain | hf-assisted |
    # vllm-plain | vllm-ngram
    family: str
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


DRAFTERS = ("draft", "ngram", "eagle")  # the drafter arms --drafters chooses from


def build_methods(target, draft, ks: list[int], temperature: float, pad_id: int = PAD_ID,
                  assisted: bool = True, eagle=None, drafters: tuple[str, ...] = ("draft", "ngram")) -> list[Method]:
    """Every method of the side-by-side table: ours plain and HF generate, then each arm of ``drafters``
    (``draft``: the draft model, with auto k and, with ``assisted``, HF assisted generation; ``ngram``;
    ``eagle``: the head ``eagle`` over the target, with auto k)."""
    methods = [Method("ours plain", "ours-plain", 0, _ours(Engine(target), temperature)),
               Method("HF generate", "hf-plain", 0, _hf(target, temperature, pad_id=pad_id))]
    arms = {"draft": ("ours draft", "ours-draft", lambda: DraftModel(draft)),
            "ngram": ("ours n-gram", "ours-ngram", NgramDrafter),
            "eagle": ("ours eagle", "ours-eagle", lambda: EagleDrafter(eagle))}
    for arm in drafters:
        label, family, make = arms[arm]
        for k in ks:
            methods.append(Method(f"{label} k={k}", family, k,
                                  _ours(Engine(target, make(), num_draft_tokens=k), temperature)))
    if "draft" in drafters:
        for k in ks if assisted else ():
            assistant = _assistant(copy.deepcopy(draft), k)
            methods.append(Method(f"HF assisted k={k}", "hf-assisted", k, _hf(target, temperature, assistant),
                                  batch_sizes=(1,)))
    # auto considers only the k whose costs the benchmark measures (c and v(k) for k <= max(ks))
    for arm, family in (("draft", "ours-auto"), ("eagle", "ours-eagle-auto")):
        if arm in drafters:
            label, _, make = arms[arm]
            auto = Engine(target, make(), config=EngineConfig(num_draft_tokens="auto", max_draft_tokens=max(ks)))
            methods.append(Method(f"{label} k=auto", family, -1, _ours(auto, temperature), engine=auto))
    return methods


def vllm_methods(folder: str, k: int, temperature: float) -> tuple[list[Method], list]:
    """vLLM plain and vLLM n-gram (its prompt lookup, ``k`` tokens, ``prompt_lookup_min/max`` 1/4 as the
    vLLM backend configures it) over the HF folder ``folder``, at batch 1, each vLLM's offline engine in its
    own actor (:mod:`trajkit.backends.vllm`; the vLLM venv) -> (methods, backends to close). Each call
    crosses Ray; its seconds are timed around the call, as ours are. vLLM's EAGLE is not among them: it reads
    EAGLE/EAGLE-3 checkpoints of its own format, not trajkit's head."""
    from trajkit.backends.build import BackendSpec, build_backend
    from trajkit.recipes.cache import vllm_python

    methods, backends = [], []
    for label, family, drafter in (("vLLM plain", "vllm-plain", "none"), (f"vLLM n-gram k={k}", "vllm-ngram", "ngram")):
        backend = build_backend(BackendSpec(backend="vllm", model=folder, drafter=drafter, k=k, python=vllm_python(),
                                            max_model_len=1024))
        backends.append(backend)
        methods.append(Method(label, family, k if drafter != "none" else 0, _vllm(backend, temperature),
                              batch_sizes=(1,)))
    return methods, backends


def _vllm(backend, temperature: float) -> Callable:
    def run(prompts, seed, new_tokens):
        params = SamplingParams(temperature=temperature, max_new_tokens=new_tokens, seed=seed)
        start = time.perf_counter()
        out = backend.generate(prompts, params)  # the worker ignores EOS: exactly new_tokens per row
        seconds = time.perf_counter() - start
        return Run(seconds, sum(len(c.token_ids) for c in out),
                   {"vllm_proposed": out.stats.proposed, "vllm_accepted": out.stats.accepted})
    return run


@dataclass
class RealPair:
    """The target/draft pair of ``bench generate --pair smollm2``: the same fields the tiny pair has, and
    the EAGLE head (None when its arm is not run); ``draft`` is None when the draft arm is not run."""

    target: object
    draft: object
    path: str
    meta: dict
    prompts: list[list[int]]
    pad_id: int
    eagle: object = None
    eagle_meta: dict | None = None


def load_smollm2_pair(drafters: tuple[str, ...] = DRAFTERS) -> RealPair:
    """SmolLM2-135M-Instruct, its distilled shortlist draft and/or its EAGLE head (those ``drafters`` name;
    each prepared and cached first when missing), and 64 chat prompts that ask for a short explanation
    (rendered by its template; other questions than the drafts were trained on)."""
    import json
    import random

    from trajkit.engine.drafters.eagle import EagleHead
    from trajkit.models.chat import render
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.models.shortlist import ShortlistLM
    from trajkit.recipes.prepared import DRAFT_NAME, EAGLE_NAME, PREPARE
    from trajkit.recipes.smollm2 import NAME

    folder = PREPARE[NAME]()
    tok = load_tokenizer(folder)
    rng = random.Random(12345)
    forms = ["Explain step by step how to compute {a} * {b}.", "What is {a} + {b}? Explain your reasoning.",
             "Write a short paragraph about the number {a}.", "How many minutes are in {a} hours? Show the steps."]
    prompts = [tok.encode(render(tok, [{"role": "user", "content": rng.choice(forms).format(
        a=rng.randint(2, 99), b=rng.randint(2, 99))}], add_generation_prompt=True), add_special_tokens=False)
        for _ in range(64)]
    target = load_model(folder).eval()
    meta = {"target_parameters": sum(p.numel() for p in target.parameters()), "draft_parameters": None}
    draft = path = eagle = eagle_meta = None
    if "draft" in drafters:
        draft_folder = PREPARE[DRAFT_NAME]()
        draft, path = ShortlistLM.from_pretrained(draft_folder).eval(), str(draft_folder)
        meta["draft_parameters"] = json.loads((draft_folder / "meta.json").read_text())["draft_parameters"]
    if "eagle" in drafters:
        eagle_folder = PREPARE[EAGLE_NAME]()
        eagle = EagleHead.load(eagle_folder, target)
        eagle_meta = json.loads((eagle_folder / "meta.json").read_text())
        meta["eagle_parameters"] = eagle_meta["head_parameters"]
        path = path or str(eagle_folder)
    return RealPair(target, draft, path or str(folder), meta, prompts, tok.pad_token_id, eagle, eagle_meta)
