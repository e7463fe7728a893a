"""A tiny model fine-tuned for a few seconds to answer given conversations with given assistant turns: the
stand-in policy that makes gateway and harness tests deterministic (it emits real ``<think>`` blocks and
``<tool_call>`` blocks, through the real engine and chat template).

Each assistant turn of each conversation is one training example: the prompt is the chat template's render
of the messages before it (with the generation prompt), the target is the rest of the render through the
end-of-turn token; the loss is the next-token cross-entropy on the target only (:func:`trajkit.models.fit.fit`).
With few examples and a high learning rate the model memorises its replies; it is greedy-decoded in tests.
"""
from __future__ import annotations

import torch

from trajkit.models.chat import render
from trajkit.models.fit import Schedule, fit, next_token_loss


def reply_examples(tokenizer, conversations: list[tuple[list[dict], list[dict] | None]]) -> list[tuple[list[int], int]]:
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


def fit_replies(model, tokenizer, conversations, steps: int = 120, lr: float = 3e-3) -> list[float]:
    """Fine-tune ``model`` in place on every assistant turn (see the module docstring); the step losses."""
    examples = reply_examples(tokenizer, conversations)
    width = max(len(ids) for ids, _ in examples)
    pad = tokenizer.pad_token_id or 0
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    mask = torch.zeros(len(examples), width - 1)
    for b, (row, start) in enumerate(examples):
        ids[b, :len(row)] = torch.tensor(row)
        mask[b, start - 1:len(row) - 1] = 1.0

    def loss(_):
        return next_token_loss(model(input_ids=ids).logits, ids, mask)

    schedule = Schedule(steps=steps, lr=lr, warmup=5, weight_decay=0.0, min_lr_ratio=0.1)
    return fit(model, iter(int, 1), loss, schedule, name="scripted")
