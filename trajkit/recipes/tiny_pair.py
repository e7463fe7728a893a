"""The shipped tiny target/draft pair: built locally from a seed in a few minutes on CPU, then cached.

``load_tiny_pair()`` returns the pair from the cache (:func:`trajkit.recipes.cache.cache_dir`), building
it first when missing (``trajkit generate --build-tiny`` does the same from the CLI). Build steps:

1. corpus: local text (:mod:`trajkit.recipes.corpus`; trajkit's synthetic agent traces by default),
   encoded by the byte tokenizer (:func:`trajkit.models.tokenizer.byte_tokenizer`), 95% train / 5% held out;
2. target: a Llama-config decoder (default 12 layers x 128 wide, ~3.2M parameters) pre-trained on the
   train split;
3. draft: a 1-layer, 96-wide Llama (~0.16M parameters) distilled from the target (forward KL) on
   corpus windows and on the target's own samples: soft cross-entropy to the target's distribution
   (:func:`trajkit.models.fit.soft_cross_entropy`), the gradient of forward KL(p || q) (Hinton et al.
   2015), on-policy data as in DistillSpec (Zhou et al. 2023); both trained by :func:`trajkit.models.fit.fit`;
4. saved with ``save_pretrained`` (+ the byte tokenizer, so ``AutoModelForCausalLM`` /
   ``AutoTokenizer`` load either folder), with ``meta.json`` (losses, timings) and benchmark prompts
   cut from the held-out split.

The cache key hashes the config and the corpus, so a different seed or corpus builds a new pair.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from trajkit.engine.engine import Engine
from trajkit.engine.params import SamplingParams
from trajkit.errors import ConfigError
from trajkit.models.fit import (
    Schedule,
    fit,
    mean_loss,
    next_token_loss,
    soft_cross_entropy,
    windows,
)
from trajkit.models.load import load_model
from trajkit.models.spec import TinySpec, build_model, parameter_count
from trajkit.models.tokenizer import IM_END_ID, PAD_ID, byte_tokenizer, save_tokenizer
from trajkit.recipes.cache import building, cache_dir
from trajkit.recipes.corpus import load_corpus

TARGET = TinySpec(vocab_size=264, hidden_size=128, num_layers=12, num_heads=4, num_kv_heads=4,
                  intermediate_size=512, max_positions=2048)
DRAFT = TinySpec(vocab_size=264, hidden_size=96, num_layers=1, num_heads=4, num_kv_heads=4,
                 intermediate_size=256, max_positions=2048)
ASSISTANT = "<|im_start|>assistant\n"
RECIPE = 3  # bump when the training code changes what a config builds


@dataclass
class TinyPairConfig:
    """Everything that determines the pair (and its cache key)."""

    seed: int = 0
    corpus: str = "auto"
    corpus_bytes: int = 2_000_000
    target: TinySpec = field(default_factory=lambda: TARGET)
    draft: TinySpec = field(default_factory=lambda: DRAFT)
    seq_len: int = 256
    batch_size: int = 8
    pretrain_steps: int = 160
    pretrain_lr: float = 3e-3
    sample_rows: int = 192  # target samples for on-policy distillation
    sample_tokens: int = 160
    distill_steps: int = 200
    distill_lr: float = 3e-3
    prompt_bytes: int = 160  # benchmark prompts: held-out context ending with an assistant header

    def __post_init__(self) -> None:
        for name in ("pretrain_steps", "distill_steps", "batch_size", "seq_len", "sample_rows"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}")

    def key(self, corpus_sha: str) -> str:
        blob = json.dumps({"config": dataclasses.asdict(self), "corpus": corpus_sha, "recipe": RECIPE},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class TinyPair:
    target: torch.nn.Module
    draft: torch.nn.Module
    path: Path
    meta: dict
    prompts: list[list[int]]  # held-out benchmark prompts (token ids)
    pad_id: int = PAD_ID


def load_tiny_pair(config: TinyPairConfig | None = None, cache: str | Path | None = None,
                   build: bool = True, log=print) -> TinyPair:
    """The cached pair for ``config``; built first (minutes) when missing and ``build`` is True."""
    config = config or TinyPairConfig()
    corpus = load_corpus(config.corpus, config.seed, config.corpus_bytes)
    root = cache_dir() if cache is None else Path(cache)
    path = root / f"tiny-pair-{config.key(corpus.sha256)}"
    if not (path / "meta.json").exists():
        if not build:
            raise ConfigError(f"no tiny pair cached at {path}; build it with: trajkit generate --build-tiny")
        build_tiny_pair(config, path, corpus, log=log)
    meta = json.loads((path / "meta.json").read_text())
    target = load_model(path / "target", what="tiny pair target")
    draft = load_model(path / "draft", what="tiny pair draft")
    prompts = json.loads((path / "prompts.json").read_text())
    return TinyPair(target, draft, path, meta, prompts)


def build_tiny_pair(config: TinyPairConfig, path: Path, corpus=None, log=print) -> Path:
    """Train the pair for ``config`` and write it to ``path`` (built aside, then published by a rename)."""
    corpus = corpus or load_corpus(config.corpus, config.seed, config.corpus_bytes)
    tok = byte_tokenizer()
    ids = torch.tensor([t for part in tok(corpus.parts, add_special_tokens=False)["input_ids"] for t in part],
                       dtype=torch.long)
    cut = int(ids.numel() * 0.95)
    train, held = ids[:cut], ids[cut:]
    log(f"tiny pair: corpus {corpus.source} ({ids.numel():,} tokens), building in {path}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reproducible, and faster on small shared CPUs
    try:
        meta = _train(config, train, held, log)
    finally:
        torch.set_num_threads(threads)
    meta.update(corpus_source=corpus.source, corpus_sha256=corpus.sha256, tokens=int(ids.numel()))
    with building(path) as tmp:
        for name in ("target", "draft"):
            meta.pop(f"_{name}_model").save_pretrained(tmp / name)
            save_tokenizer(tok, tmp / name)
        (tmp / "prompts.json").write_text(json.dumps(assistant_prompts(held.tolist(), config.prompt_bytes)))
        (tmp / "meta.json").write_text(json.dumps({"config": dataclasses.asdict(config), **meta}, indent=1))
    return path


def _train(config: TinyPairConfig, train: torch.Tensor, held: torch.Tensor, log) -> dict:
    start = time.perf_counter()
    target = build_model(config.target, config.seed)
    log(f"target: {parameter_count(target):,} parameters")
    pre = fit(target, _windows(train, config, config.seed, config.seq_len + 1),
              lambda batch: next_token_loss(target(input_ids=batch).logits, batch),
              _schedule(config.pretrain_steps, config.pretrain_lr, config), name="pretrain", log=log)
    t_pre = time.perf_counter()
    samples = target_samples(target, train.tolist(), config)
    t_samples = time.perf_counter()
    draft = build_model(config.draft, config.seed + 1)
    log(f"draft: {parameter_count(draft):,} parameters; distilling on corpus + {samples.numel():,} "
        "sampled tokens")
    sources = [train, samples] if samples.numel() > config.seq_len else [train]

    def distill_loss(batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            teacher = torch.log_softmax(target(input_ids=batch).logits.float(), dim=-1)
        return soft_cross_entropy(draft(input_ids=batch).logits, teacher)
    target.eval()
    ce = fit(draft, _mixed_windows(sources, config, config.seed + 2), distill_loss,
             _schedule(config.distill_steps, config.distill_lr, config), name="distill", log=log)
    t_end = time.perf_counter()
    return {"_target_model": target, "_draft_model": draft,
            "target_parameters": parameter_count(target), "draft_parameters": parameter_count(draft),
            "pretrain_final_loss": sum(pre[-10:]) / len(pre[-10:]),
            "distill_final_soft_ce": sum(ce[-10:]) / len(ce[-10:]),
            "heldout_loss_target": mean_loss(target, held, config.seq_len),
            "heldout_loss_draft": mean_loss(draft, held, config.seq_len),
            "seconds": {"pretrain": t_pre - start, "samples": t_samples - t_pre, "distill": t_end - t_samples}}


def _schedule(steps: int, lr: float, config: TinyPairConfig) -> Schedule:
    return Schedule(steps, lr, warmup=max(1, steps // 10), batch_size=config.batch_size, seq_len=config.seq_len)


def _windows(data: torch.Tensor, config: TinyPairConfig, seed: int, length: int):
    gen = torch.Generator().manual_seed(seed)
    while True:
        yield windows(data, config.batch_size, length, gen)


def _mixed_windows(sources: list[torch.Tensor], config: TinyPairConfig, seed: int):
    """Batches drawn equally from each of ``sources`` (``[N_i]`` long)."""
    gen = torch.Generator().manual_seed(seed)
    per = -(-config.batch_size // len(sources))
    while True:
        yield torch.cat([windows(d, per, config.seq_len, gen) for d in sources])


def assistant_prompts(ids: list[int], width: int, limit: int = 64) -> list[list[int]]:
    """Up to ``limit`` contexts of ``width`` tokens ending with an assistant header, from ``ids``; when
    the text has too few headers (the stdlib corpus has none), evenly spaced windows fill the rest."""
    header = byte_tokenizer().encode(ASSISTANT, add_special_tokens=False)
    out = []
    for i in range(max(0, width - len(header)), len(ids) - len(header) + 1):
        if ids[i:i + len(header)] == header:
            out.append(ids[i + len(header) - width:i + len(header)])
            if len(out) == limit:
                return out
    step = max(1, (len(ids) - width) // max(1, limit - len(out)))
    out.extend(ids[s:s + width] for s in range(0, len(ids) - width + 1, step))
    return out[:limit]


def target_samples(target, train: list[int], config: TinyPairConfig) -> torch.Tensor:
    """The target's own continuations of assistant prompts from the train split, separated by pad."""
    prompts = assistant_prompts(train, 64, limit=config.sample_rows)
    engine = Engine(target)
    params = SamplingParams(temperature=1.0, max_new_tokens=config.sample_tokens, seed=config.seed,
                            stop_token_ids=[IM_END_ID])
    out: list[int] = []
    for i in range(0, len(prompts), 128):
        for p, c in zip(prompts[i:i + 128], engine.generate(prompts[i:i + 128], params)):
            out.extend(p + c.token_ids + [PAD_ID])
    return torch.tensor(out, dtype=torch.long)
