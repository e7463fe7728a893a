"""A tiny model fine-tuned for a few seconds to answer given conversations with given assistant turns: the
stand-in policy that makes gateway and harness tests deterministic (it emits real ``<think>`` blocks and
``<tool_call>`` blocks, through the real engine and chat template).

Each assistant turn of each conversation is one training example: the prompt is the chat template's render
of the messages before it (with the generation prompt), the target is the rest of the render through the
end-of-turn token; the loss is the next-token cross-entropy on the target only. The output head runs only
at the target positions (:func:`trajkit.models.fit.next_token_loss_at`): with a long prompt (a real
agent's ~11K-character system prompt) the head over every prompt position would be most of the work. With few examples and a high
learning rate the model memorises its replies; it is greedy-decoded in tests.

Two additions make a memorised model usable against a real harness whose prompt is not quite fixed
(:func:`scripted_model`):

- **perturbation**: a harness writes volatile text into its prompt (the date, the working directory, the
  host). ``perturb(messages, rng)`` rewrites those parts with random values, freshly for every training
  step, so the replies are learnt as a function of the stable parts only (data augmentation; the cost per
  step is unchanged). The build then checks greedy decoding on a perturbation it never trained on.
- **a BPE vocabulary trained on the conversations** (:func:`trajkit.models.tokenizer.bpe_tokenizer`): about
  4x fewer tokens than bytes on such a prompt, so every step is cheaper; any text still encodes (byte
  level). The model, its tokenizer and a report are cached under ``cache_dir()/scripted/<hash>`` where the
  hash covers everything that determines the result (conversations, perturbation name, shape, schedule).
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from trajkit.errors import ConfigError
from trajkit.models.chat import render
from trajkit.models.fit import Schedule, fit, next_token_loss_at
from trajkit.models.spec import TinySpec, build_model
from trajkit.recipes.cache import building, cache_dir

VERSION = 2  # bump when this recipe changes what a key builds (2: the one Hermes layout, traces/hermes_text)

Conversation = tuple[list[dict], "list[dict] | None"]  # (messages, tools)
Perturb = Callable[[list[dict], random.Random], list[dict]]  # messages -> messages with volatile text redrawn
reply_loss = next_token_loss_at  # its name here before it moved to trajkit.models.fit


def reply_examples(tokenizer, conversations: list[Conversation]) -> list[tuple[list[int], int]]:
    """``(ids, prompt_length)`` per assistant turn of each ``(messages, tools)`` conversation."""
    out = []
    for messages, tools in conversations:
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            prompt = render(tokenizer, messages[:i], tools, add_generation_prompt=True)
            full = render(tokenizer, messages[:i + 1], tools)
            target = full[len(prompt):]
            target = target[:target.index(tokenizer.eos_token) + len(tokenizer.eos_token)]
            p_ids = tokenizer.encode(prompt, add_special_tokens=False)
            out.append((p_ids + tokenizer.encode(target, add_special_tokens=False), len(p_ids)))
    return out


def collate_replies(examples: list[tuple[list[int], int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ``ids: [B, L]`` (right-padded) and ``mask: [B, L-1]`` (1 where position t predicts a target token)."""
    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    mask = torch.zeros(len(examples), width - 1)
    for b, (row, start) in enumerate(examples):
        ids[b, :len(row)] = torch.tensor(row)
        mask[b, start - 1:len(row) - 1] = 1.0
    return ids, mask


def fit_replies(model, tokenizer, conversations: list[Conversation], steps: int = 120, lr: float = 3e-3,
                perturb: Perturb | None = None, seed: int = 0) -> list[float]:
    """Fine-tune ``model`` in place on every assistant turn (see the module docstring); the step losses.
    With ``perturb``, every step trains on freshly perturbed conversations (drawn from ``seed``)."""
    rng = random.Random(seed)
    pad = tokenizer.pad_token_id or 0

    def batches():
        fixed = collate_replies(reply_examples(tokenizer, conversations), pad) if perturb is None else None
        while True:
            if fixed is not None:
                yield fixed
            else:
                drawn = [(perturb(messages, rng), tools) for messages, tools in conversations]
                yield collate_replies(reply_examples(tokenizer, drawn), pad)

    schedule = Schedule(steps=steps, lr=lr, warmup=5, weight_decay=0.0, min_lr_ratio=0.1)
    return fit(model, batches(), lambda b: next_token_loss_at(model, *b), schedule, name="scripted")


def replay_mismatches(model, tokenizer, conversations: list[Conversation]) -> list[dict]:
    """Greedy-decode every assistant turn; the turns whose decode differs from the script (empty: all match)."""
    from trajkit.engine import Engine, SamplingParams

    engine, bad = Engine(model), []
    for ids, start in reply_examples(tokenizer, conversations):
        want = ids[start:]
        got = engine.generate([ids[:start]], SamplingParams(temperature=0.0, max_new_tokens=len(want) + 8,
                                                             stop_token_ids=(tokenizer.eos_token_id,)))[0]
        if list(got.token_ids) != want:
            bad.append({"expected": tokenizer.decode(want), "got": tokenizer.decode(got.token_ids)})
    return bad


@dataclass(frozen=True)
class ScriptedRecipe:
    """Everything that determines a cached scripted model (hashed into its path). ``shape`` gives the model's
    size (its ``vocab_size`` is replaced by the tokenizer's); ``vocab_size`` 0 keeps the byte vocabulary."""

    shape: TinySpec = field(default_factory=lambda: TinySpec(
        hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, max_positions=8192))
    vocab_size: int = 2048
    steps: int = 150
    lr: float = 1e-2
    seed: int = 0
    perturb_name: str = ""  # names the perturbation function (part of the key; bump it when the function changes)

    def path(self, conversations: list[Conversation]) -> Path:
        blob = json.dumps({"v": VERSION, "recipe": asdict(self), "conversations": conversations}, sort_keys=True)
        return cache_dir() / "scripted" / hashlib.sha256(blob.encode()).hexdigest()[:16]


def _tokenizer(recipe: ScriptedRecipe, conversations: list[Conversation]):
    from trajkit.models.tokenizer import bpe_tokenizer, byte_tokenizer

    byte = byte_tokenizer()
    if not recipe.vocab_size:
        return byte
    texts = [render(byte, messages, tools) for messages, tools in conversations]
    return bpe_tokenizer(texts * 2, recipe.vocab_size)  # twice: every piece reaches min_frequency 2


def build_scripted(recipe: ScriptedRecipe, conversations: list[Conversation], out: Path,
                   perturb: Perturb | None = None) -> dict:
    """Train a scripted model into ``out/model`` and ``out/tokenizer``; returns the report (also written)."""
    from trajkit.models.tokenizer import save_tokenizer

    tokenizer = _tokenizer(recipe, conversations)
    model = build_model(replace(recipe.shape, vocab_size=len(tokenizer)), seed=recipe.seed)
    began = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        losses = fit_replies(model, tokenizer, conversations, recipe.steps, recipe.lr, perturb, recipe.seed)
    check = conversations
    if perturb is not None:  # a perturbation the training never drew
        rng = random.Random(f"check:{recipe.seed}")
        check = [(perturb(messages, rng), tools) for messages, tools in conversations]
    bad = replay_mismatches(model, tokenizer, check)
    report = {"seconds": round(time.perf_counter() - began, 1), "final_loss": losses[-1],
              "prompt_tokens": [n for _, n in reply_examples(tokenizer, conversations)],
              "vocab_size": len(tokenizer), "mismatches": bad}
    if bad:
        raise ConfigError(f"the scripted model did not learn its replies in {recipe.steps} steps (final loss "
                          f"{losses[-1]:.4f}; first mismatch {bad[0]}); raise ScriptedRecipe.steps or lr")
    model.save_pretrained(out / "model")
    save_tokenizer(tokenizer, out / "tokenizer")
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return report


def scripted_model(conversations: list[Conversation], recipe: ScriptedRecipe | None = None,
                   perturb: Perturb | None = None) -> Path:
    """The cached folder (``model/``, ``tokenizer/``, ``report.json``) of a model that greedily answers
    ``conversations`` with their assistant turns; built now when missing (see the module docstring)."""
    recipe = recipe or ScriptedRecipe()
    if (perturb is None) != (not recipe.perturb_name):
        raise ConfigError("scripted_model: give perturb together with recipe.perturb_name (the name keys the cache)")
    path = recipe.path(conversations)
    if not (path / "report.json").exists():
        with building(path) as tmp:
            build_scripted(recipe, conversations, tmp, perturb)
    return path
