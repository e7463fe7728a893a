"""An EAGLE-style draft head for SmolLM2-135M-Instruct, trained offline on the target's own samples; cached.

``prepare_eagle()`` returns a folder that ``draft.kind: eagle`` loads with the target
(:class:`~trajkit.engine.drafters.eagle.EagleHead`). Build steps (``trajkit models prepare
smollm2-135m-instruct-eagle``; minutes on 2 CPU cores, every step logs its progress):

1. **samples** (cached on their own, ``eagle-samples-KEY.json``, so a new training recipe reuses them): the
   prompts of the shortlist draft's recipe (:mod:`trajkit.recipes.smollm2_draft`: ``arith`` questions and
   user turns of synthetic agent traces, SmolLM2's chat template), answered by the target with trajkit's
   engine at ``temperature``; a tenth of them held out;
2. **shortlist**: the ``shortlist`` most frequent ids (the draft recipe's count over the trace corpus and
   the samples), the only ids the head's output layer computes;
3. **features**: one target forward over every sequence with ``output_hidden_states``: the head's input
   layers and, per position, ``log Z`` of the target's tempered logits (the teacher's exact normaliser);
4. **training** (:meth:`EagleHead.unroll`, EAGLE-3's training-time test): random windows of the
   sequences (prompts included: the target's distributions there are teacher signal too), at most ``steps``
   steps and ``train_seconds`` seconds, ``ttt_steps`` steps of the head fed its own features, each step's
   loss the restricted soft cross-entropy ``-sum_{v in S} p(v) log q(v)`` against the target's
   distribution at ``temperature``;
5. **evaluation** on the held-out sequences: ``alpha = sum_v min(p, q)`` per drafting step (q exactly 0
   outside the shortlist), then real speculative generation with the engine (k = 4, batch 1, the held-out
   prompts): its measured alpha and acceptance length. All in ``meta.json``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from trajkit.recipes.cache import building, cache_dir
from trajkit.recipes.smollm2 import NAME, prepare_model

RECIPE = 1


@dataclass(frozen=True)
class EagleRecipe:
    prompts: int = 160
    new_tokens: int = 128
    temperature: float = 0.7
    shortlist: int = 8192
    steps: int = 300
    train_seconds: float = 720.0  # training stops here even before ``steps`` (a loaded machine is slower)
    batch_size: int = 8
    window: int = 64
    ttt_steps: int = 3
    lr: float = 2e-3
    prompt_positions: bool = True  # train on the prompts' positions too (the target's distributions there)
    eval_prompts: int = 8
    eval_tokens: int = 64
    seed: int = 0
    threads: int = 2

    def sample_key(self) -> str:
        blob = json.dumps({"prompts": self.prompts, "new_tokens": self.new_tokens,
                           "temperature": self.temperature, "seed": self.seed}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    def key(self) -> str:
        fields = dataclasses.asdict(self)
        fields.pop("threads")
        blob = json.dumps({"recipe": RECIPE, **fields}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def eagle_folder(recipe: EagleRecipe = EagleRecipe(), root: Path | None = None) -> Path:
    """Where ``recipe``'s head is cached (built there or not: :func:`is_built`)."""
    return (root or cache_dir()) / NAME / f"eagle-{recipe.key()}"


def is_built(folder: Path) -> bool:
    """A finished head folder (its recipe's ``meta.json`` is written last)."""
    return (folder / "meta.json").exists()


def prepare_eagle(recipe: EagleRecipe = EagleRecipe(), root: Path | None = None, log=print) -> Path:
    """The cached head folder for ``recipe`` (built first when missing)."""
    path = eagle_folder(recipe, root)
    if not is_built(path):
        with building(path) as tmp:
            build_eagle(recipe, Path(tmp), root, log)
    return path


def target_samples(recipe: EagleRecipe, target, tok, root: Path | None, log=print) -> dict:
    """``{"prompts": [...], "seqs": [...]}`` (token ids), sampled once and cached beside the model."""
    from trajkit.engine import Engine, SamplingParams
    from trajkit.models.chat import stop_token_ids
    from trajkit.recipes.smollm2_draft import DraftRecipe, _prompt_texts

    path = (root or cache_dir()) / NAME / f"eagle-samples-{recipe.sample_key()}.json"
    if path.exists():
        return json.loads(path.read_text())
    texts = _prompt_texts(DraftRecipe(prompts=recipe.prompts, seed=recipe.seed), tok)
    prompts = [tok.encode(t, add_special_tokens=False) for t in texts]
    engine, seqs, start = Engine(target), [], time.perf_counter()
    for i in range(0, len(prompts), 32):
        outs = engine.generate(prompts[i:i + 32], SamplingParams(
            temperature=recipe.temperature, max_new_tokens=recipe.new_tokens,
            stop_token_ids=stop_token_ids(tok), seed=recipe.seed + i))
        seqs += [p + list(o.token_ids) for p, o in zip(prompts[i:i + 32], outs)]
        log(f"eagle: sampled {len(seqs)}/{len(prompts)} target completions ({time.perf_counter() - start:.0f}s)")
    data = {"prompts": prompts, "seqs": seqs}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.rename(path)
    return data


@torch.no_grad()
def target_features(target, layers: tuple[int, ...], seqs: list[list[int]], temperature: float, log=print):
    """Per sequence: (features ``[L, F]`` of ``layers``, ``log Z [L]`` of the tempered logits)."""
    out, start = [], time.perf_counter()
    for i, s in enumerate(seqs):
        res = target(input_ids=torch.tensor([s]), output_hidden_states=True)
        feats = torch.cat([res.hidden_states[j][0] for j in layers], dim=-1)
        out.append((feats, torch.logsumexp(res.logits[0].float() / temperature, dim=-1)))
        if (i + 1) % 40 == 0:
            log(f"eagle: target features {i + 1}/{len(seqs)} ({time.perf_counter() - start:.0f}s)")
    return out


class Windows:
    """Random training windows over the completions: entries ``a .. a + window - 1`` of a sequence."""

    def __init__(self, seqs, prompts, feats, rows, recipe: EagleRecipe, seed: int):
        self.seqs, self.prompts, self.feats, self.rows = seqs, prompts, feats, rows
        self.recipe = recipe
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, rows=None, whole: bool = False):
        """(raw [B, W, F], tokens [B, W], positions [B, W], teacher rows (final feature, log Z) [B, W],
        mask [B, W]: entries whose next token was sampled by the target)."""
        r = self.recipe
        if rows is None:
            rows = [self.rows[int(i)] for i in torch.randint(len(self.rows), (r.batch_size,), generator=self.gen)]
        spans = []
        for b in rows:
            first, last = max(1, len(self.prompts[b]) - 1), len(self.seqs[b]) - 2  # entries predicting a sample
            if whole:
                spans.append((first, last + 1))
                continue
            lo = 1 if r.prompt_positions else max(1, first - 8)
            a = lo + int(torch.randint(max(1, last - r.window + 2 - lo), (1,), generator=self.gen))
            spans.append((a, min(a + r.window, last + 1)))
        width = max(e - a for a, e in spans)
        f = self.feats[rows[0]][0].shape[1]
        raw, final = torch.zeros(len(rows), width, f), torch.zeros(len(rows), width, f)
        logz = torch.zeros(len(rows), width)
        tokens = torch.zeros(len(rows), width, dtype=torch.long)
        positions = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, (b, (a, e)) in enumerate(zip(rows, spans)):
            n = e - a
            feats, z = self.feats[b]
            raw[i, :n], final[i, :n], logz[i, :n] = feats[a - 1:e - 1], feats[a:e], z[a:e]
            tokens[i, :n] = torch.tensor(self.seqs[b][a:e])
            positions[i, :n] = torch.arange(a, e)
            mask[i, :n] = True if r.prompt_positions and not whole else torch.arange(a, e) >= len(self.prompts[b]) - 1
        return raw, tokens, positions, (final, logz), mask


def teacher_logp(head, final: torch.Tensor, logz: torch.Tensor, temperature: float) -> torch.Tensor:
    """The target's log-probs at the shortlist ``[B, W, K]`` from its last (normed) hidden state."""
    d = head.fuse.out_features
    logits = final[..., -d:] @ head.shared.out.weight[head.ids].T
    return logits / temperature - logz.unsqueeze(-1)


def ttt_loss(head, batch, recipe: EagleRecipe) -> torch.Tensor:
    """Mean over training-time-test steps of the restricted soft cross-entropy (module docstring)."""
    raw, tokens, positions, (final, logz), mask = batch
    teacher = teacher_logp(head, final, logz, recipe.temperature).exp()
    total = 0.0
    for j, hidden in enumerate(head.unroll(raw, tokens, positions, recipe.ttt_steps)):
        log_q = torch.log_softmax(head.local_logits(hidden) / recipe.temperature, dim=-1)
        m = mask.clone()
        m[:, :j] = False  # step j's chain would start before the window
        total = total + (-(teacher * log_q).sum(-1) * m).sum() / m.sum().clamp(min=1)
    return total / recipe.ttt_steps


@torch.no_grad()
def held_out_alpha(head, windows: Windows, rows, recipe: EagleRecipe) -> list[float]:
    """``mean sum_v min(p, q)`` per drafting step over the held-out sequences' sampled positions."""
    sums, counts = [0.0] * recipe.ttt_steps, [0] * recipe.ttt_steps
    for b in rows:
        raw, tokens, positions, (final, logz), mask = windows.batch([b], whole=True)
        p = teacher_logp(head, final, logz, recipe.temperature).exp()
        for j, hidden in enumerate(head.unroll(raw, tokens, positions, recipe.ttt_steps)):
            q = torch.softmax(head.local_logits(hidden) / recipe.temperature, dim=-1)
            m = mask.clone()
            m[:, :j] = False
            sums[j] += float(torch.minimum(p, q).sum(-1)[m].sum())
            counts[j] += int(m.sum())
    return [s / max(c, 1) for s, c in zip(sums, counts)]


def engine_eval(target, head, prompts: list[list[int]], recipe: EagleRecipe, tok) -> dict:
    """Speculative generation at k = 4, batch 1, on held-out prompts: the engine's alpha, acceptance."""
    from trajkit.engine import Engine, SamplingParams
    from trajkit.engine.drafters.eagle import EagleDrafter
    from trajkit.engine.types import GenerationStats
    from trajkit.models.chat import stop_token_ids

    engine = Engine(target, drafter=EagleDrafter(head), num_draft_tokens=4)
    parts = [engine.generate([p], SamplingParams(temperature=recipe.temperature, max_new_tokens=recipe.eval_tokens,
                                                 stop_token_ids=stop_token_ids(tok), seed=recipe.seed + i)).stats
             for i, p in enumerate(prompts)]
    stats = GenerationStats.merge(*parts)
    return {"alpha": stats.alpha, "acceptance_length": stats.mean_acceptance_length,
            "acceptance_rate": stats.acceptance_rate, "per_position": stats.per_position_acceptance,
            "new_tokens": stats.new_tokens, "prompts": len(prompts), "k": 4}


def build_eagle(recipe: EagleRecipe, out: Path, root: Path | None = None, log=print) -> dict:
    from trajkit.engine.drafters.eagle import EagleHead, default_layers
    from trajkit.models.fit import Schedule, fit
    from trajkit.models.load import load_model, load_tokenizer
    from trajkit.recipes.smollm2_draft import DraftRecipe, _shortlist

    torch.set_num_threads(recipe.threads)
    start = time.perf_counter()
    folder = prepare_model()  # the target always comes from the shared cache; root holds the head
    target, tok = load_model(folder).eval(), load_tokenizer(folder)
    for p in target.parameters():
        p.requires_grad_(False)
    data = target_samples(recipe, target, tok, root, log)
    prompts, seqs = data["prompts"], data["seqs"]
    sampled = time.perf_counter()
    ids = _shortlist(DraftRecipe(shortlist=recipe.shortlist, seed=recipe.seed), tok,
                     [s[len(p):] for s, p in zip(seqs, prompts)])
    head = EagleHead(target, default_layers(target), ids, init_seed=recipe.seed)
    log(f"eagle: head {sum(p.numel() for p in head.parameters()) / 1e6:.1f}M trainable parameters, "
        f"features of layers {head.layers}, shortlist {len(ids)}")
    feats = target_features(target, head.layers, seqs, recipe.temperature, log)
    featured = time.perf_counter()
    n_held = max(1, len(seqs) // 10)
    held, train_rows = list(range(n_held)), list(range(n_held, len(seqs)))
    windows = Windows(seqs, prompts, feats, train_rows, recipe, recipe.seed)
    alpha_before = held_out_alpha(head, windows, held, recipe)

    def batches():
        began = time.perf_counter()
        while time.perf_counter() - began < recipe.train_seconds:
            yield windows.batch()

    schedule = Schedule(recipe.steps, recipe.lr, warmup=20, weight_decay=0.0, betas=(0.9, 0.95))
    losses = fit(head, batches(), lambda b: ttt_loss(head, b, recipe), schedule, name="eagle", log=log, log_every=20)
    head.eval()
    trained = time.perf_counter()
    alpha = held_out_alpha(head, windows, held, recipe)
    log(f"eagle: held-out alpha per drafting step {[round(a, 3) for a in alpha_before]} -> "
        f"{[round(a, 3) for a in alpha]}; running the engine on {recipe.eval_prompts} held-out prompts")
    evaluation = engine_eval(target, head, [prompts[b] for b in held[:recipe.eval_prompts]], recipe, tok)
    head.save(out)
    meta = {"recipe": dataclasses.asdict(recipe), "key": recipe.key(), "layers": list(head.layers),
            "head_parameters": sum(p.numel() for p in head.parameters()),
            "alpha_held_out_before": alpha_before, "alpha_held_out": alpha, "engine_eval": evaluation,
            "loss_first": losses[0], "loss_last": losses[-1], "train_steps": len(losses),
            "sequences": len(seqs), "held_out": n_held,
            "sample_seconds": sampled - start, "feature_seconds": featured - sampled,
            "train_seconds": trained - featured, "build_seconds": time.perf_counter() - start}
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    log(f"eagle: engine k=4 alpha {evaluation['alpha']:.3f}, acceptance length {evaluation['acceptance_length']:.2f}; "
        f"built in {meta['build_seconds']:.0f}s")
    return meta
