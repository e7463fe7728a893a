"""A small draft for SmolLM2-135M-Instruct, distilled from it and sharing its tokenizer; built once, cached.

``prepare_draft()`` returns a folder that ``draft.kind: model`` / ``draft.model.path`` loads (a
:class:`~trajkit.models.shortlist.ShortlistLM`). Build steps (a few minutes on 2 CPU cores):

1. **prompts**: the ``arith`` task's train questions and user turns of trajkit's synthetic agent traces,
   rendered by SmolLM2's chat template; a tenth held out;
2. **target samples** (on-policy data, as DistillSpec, Zhou et al. 2023, recommends): the target answers
   every prompt at ``temperature`` for ``new_tokens`` tokens with trajkit's engine;
3. **shortlist**: the ``shortlist`` most frequent token ids of the samples and of the traces corpus
   tokenized by SmolLM2 (special tokens always in);
4. **initialisation**: the target's embedding rows of the shortlist, its first ``layers`` decoder layers
   and its final norm (SmolLM2 ties input and output embeddings, so the head starts as the target's rows);
5. **distillation**: restricted soft cross-entropy to the target's distribution at ``temperature`` on
   the samples (``ShortlistLM`` docstring), AdamW, ``steps`` steps;
6. ``meta.json``: build seconds, losses, the held-out estimate of ``alpha = sum_v min(p, q)`` (the
   expected per-token acceptance of speculative sampling) and the target mass inside the shortlist.

The cache key hashes the recipe, so changing a knob builds a new draft beside the old one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from trajkit.recipes.cache import building, cache_dir
from trajkit.recipes.smollm2 import NAME, prepare_model

RECIPE = 1


@dataclass(frozen=True)
class DraftRecipe:
    layers: int = 4
    shortlist: int = 8192
    prompts: int = 160
    new_tokens: int = 128
    temperature: float = 0.7
    steps: int = 300
    lr: float = 3e-4
    batch_size: int = 8
    seed: int = 0

    def key(self) -> str:
        blob = json.dumps({"recipe": RECIPE, **dataclasses.asdict(self)}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def prepare_draft(recipe: DraftRecipe = DraftRecipe(), root: Path | None = None, log=print) -> Path:
    """The cached draft folder for ``recipe`` (built first when missing)."""
    path = (root or cache_dir()) / NAME / f"draft-{recipe.key()}"
    if not (path / "meta.json").exists():
        with building(path) as tmp:
            build_draft(recipe, Path(tmp), log)
    return path


def _prompt_texts(recipe: DraftRecipe, tok) -> list[str]:
    from trajkit.models.chat import render
    from trajkit.synth import SynthConfig, generate

    rng = random.Random(recipe.seed)
    questions = ["What is {a} + {b}? Answer with only the number.", "What is {a} + {b}? Explain briefly.",
                 "Compute {a} * {b} step by step.", "If I have {a} apples and buy {b} more, how many do I have?"]
    texts = [render(tok, [{"role": "user", "content": rng.choice(questions).format(a=rng.randint(1, 99),
                                                                                     b=rng.randint(1, 99))}],
                    add_generation_prompt=True) for _ in range(recipe.prompts // 2)]
    users = []
    for style in ("kimi", "glm-5.1"):
        for row in generate(SynthConfig(rows=recipe.prompts, style=style, seed=recipe.seed)):
            users += [m["value"][:600] for m in row["conversations"] if m["from"] == "human"]
    random.Random(recipe.seed).shuffle(users)
    texts += [render(tok, [{"role": "user", "content": u}], add_generation_prompt=True)
              for u in users[:recipe.prompts - len(texts)]]
    random.Random(recipe.seed + 1).shuffle(texts)
    return texts


def _shortlist(recipe: DraftRecipe, tok, samples: list[list[int]]) -> list[int]:
    from trajkit.recipes.corpus import load_corpus

    counts = torch.zeros(len(tok), dtype=torch.long)
    corpus = load_corpus("traces", seed=recipe.seed, max_bytes=1_000_000)
    for part in corpus.parts:
        ids = tok.encode(part, add_special_tokens=False)
        counts += torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=len(tok))
    for ids in samples:  # the target's own tokens weigh more: they are what the draft must propose
        counts += 20 * torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=len(tok))
    special = [i for i in tok.all_special_ids if i < len(tok)]
    counts[special] = counts.max() + 1
    top = torch.argsort(counts, descending=True, stable=True)[:recipe.shortlist]
    return sorted(top.tolist())


def build_draft(recipe: DraftRecipe, out: Path, log=print) -> dict:
    from transformers import LlamaForCausalLM

    from trajkit.engine import Engine, SamplingParams
    from trajkit.models.chat import stop_token_ids
    from trajkit.models.fit import Schedule, fit, soft_cross_entropy
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.models.shortlist import ShortlistLM

    start = time.perf_counter()
    folder = prepare_model()
    target, tok = load_model(folder).eval(), load_tokenizer(folder)
    texts = _prompt_texts(recipe, tok)
    prompts = [tok.encode(t, add_special_tokens=False) for t in texts]
    log(f"draft: sampling {len(prompts)} target completions of up to {recipe.new_tokens} tokens")
    engine = Engine(target)
    seqs: list[list[int]] = []
    for i in range(0, len(prompts), 32):
        outs = engine.generate(prompts[i:i + 32], SamplingParams(
            temperature=recipe.temperature, max_new_tokens=recipe.new_tokens, stop_token_ids=stop_token_ids(tok),
            seed=recipe.seed + i))
        seqs += [p + list(o.token_ids) for p, o in zip(prompts[i:i + 32], outs)]
    sampled_at = time.perf_counter()
    ids = _shortlist(recipe, tok, [s[len(p):] for s, p in zip(seqs, prompts)])

    config = target.config.to_dict()
    config.update(num_hidden_layers=recipe.layers, vocab_size=len(ids) + 1, tie_word_embeddings=True)
    for key in ("layer_types", "_name_or_path", "architectures", "transformers_version"):
        config.pop(key, None)
    inner = LlamaForCausalLM(type(target.config)(**config))
    with torch.no_grad():
        emb = target.get_input_embeddings().weight
        inner.model.embed_tokens.weight[:-1] = emb[ids]
        inner.model.embed_tokens.weight[-1] = emb.mean(0)
        for mine, theirs in zip(inner.model.layers, target.model.layers):
            mine.load_state_dict(theirs.state_dict())
        inner.model.norm.load_state_dict(target.model.norm.state_dict())
    inner.tie_weights()
    draft = ShortlistLM(inner, ids, len(tok))

    # teacher log-probs at the shortlist, once (float16 to halve the memory), on padded batches
    n_held = max(1, len(seqs) // 10)
    width = max(len(s) for s in seqs)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    tokens = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.bool)
    for r, (s, p) in enumerate(zip(seqs, prompts)):
        tokens[r, :len(s)] = torch.tensor(s)
        mask[r, len(p) - 1:len(s) - 1] = True  # positions that predict a sampled token
    attention = torch.arange(width).unsqueeze(0) < torch.tensor([len(s) for s in seqs]).unsqueeze(1)
    teacher = torch.empty(len(seqs), width, len(ids), dtype=torch.float16)
    inside = []
    with torch.no_grad():
        for r in range(0, len(seqs), 8):
            logits = target(input_ids=tokens[r:r + 8], attention_mask=attention[r:r + 8]).logits
            logp = torch.log_softmax(logits.float() / recipe.temperature, -1)
            inside.append(logp[..., draft.ids].exp().sum(-1)[mask[r:r + 8]])
            teacher[r:r + 8] = logp[..., draft.ids].half()
    train_rows, held_rows = torch.arange(n_held, len(seqs)), torch.arange(n_held)
    gen = torch.Generator().manual_seed(recipe.seed)

    def batches():
        while True:
            yield train_rows[torch.randint(len(train_rows), (recipe.batch_size,), generator=gen)]

    def loss_fn(rows):
        logits = draft.local_logits(tokens[rows], attention_mask=attention[rows])
        return soft_cross_entropy(logits.float(), teacher[rows].float(), mask[rows], recipe.temperature)

    alpha_before = _alpha(draft, tokens, attention, teacher, mask, held_rows, recipe.temperature)
    schedule = Schedule(recipe.steps, recipe.lr, warmup=20, weight_decay=0.0, betas=(0.9, 0.95))
    losses = fit(draft, batches(), loss_fn, schedule, name="draft", log=log, log_every=50)
    alpha = _alpha(draft, tokens, attention, teacher, mask, held_rows, recipe.temperature)
    draft.save_pretrained(out)
    tok.save_pretrained(str(out))
    params = sum(p.numel() for p in inner.parameters())
    meta = {"recipe": dataclasses.asdict(recipe), "key": recipe.key(), "draft_parameters": params,
            "target_parameters": sum(p.numel() for p in target.parameters()),
            "shortlist_mass": float(torch.cat(inside).mean()), "alpha_held_out_before": alpha_before,
            "alpha_held_out": alpha, "loss_first": losses[0], "loss_last": losses[-1],
            "sample_seconds": sampled_at - start, "build_seconds": time.perf_counter() - start,
            "sequences": len(seqs), "held_out": n_held}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    log(f"draft: alpha {alpha_before:.3f} -> {alpha:.3f} (held out), shortlist mass {meta['shortlist_mass']:.3f}, "
        f"{params / 1e6:.1f}M parameters, {meta['build_seconds']:.0f}s")
    return meta


def _alpha(draft, tokens, attention, teacher, mask, rows, temperature: float) -> float:
    """Mean over held-out sampled positions of ``sum_v min(p(v), q(v))``, q zero outside the shortlist."""
    with torch.no_grad():
        q = torch.softmax(draft.local_logits(tokens[rows], attention_mask=attention[rows]).float() / temperature, -1)
        p = teacher[rows].float().exp()
        overlap = torch.minimum(p, q).sum(-1)
    return float(overlap[mask[rows]].mean())
