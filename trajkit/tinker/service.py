"""The Tinker server's state and operations, transport-free (the routes are :mod:`trajkit.tinker.app`).

Sessions, LoRA training clients (:class:`trajkit.tinker.training.TrainingClients`), sampling sessions (an adapter
snapshot, or the base model, for :class:`trajkit.tinker.sampling.Sampler`) and checkpoints
(:class:`trajkit.tinker.checkpoints.Store`). Ids follow what the SDK assumes: a training client's
``model_id`` is ``f"{session_id}:train:{model_seq_id}"``, a sampling session's
``f"{session_id}:sample:{seq_id}"``; each sampled sequence gets ``f"{request_id}:{i}"``.
"""
from __future__ import annotations

import copy
import itertools
import time
from dataclasses import dataclass

from trajkit.engine.adapters import LoraAdapter
from trajkit.errors import InputError
from trajkit.rl.config import LoRAConfig
from trajkit.tinker import checkpoints, fields
from trajkit.tinker.sampling import BASE, PromptScores, Sampler, Sequence, prompt_scores
from trajkit.tinker.training import TrainingClients, lora_config


@dataclass
class SamplingSession:
    key: str
    adapter: LoraAdapter
    base_model: str
    model_path: str | None


class TinkerService:
    """Everything behind the routes, over one base model served as ``model_name``."""

    def __init__(self, model, tokenizer, model_name: str, tokenizer_id: str, checkpoint_dir: str):
        self.model_name, self.tokenizer, self.tokenizer_id = model_name, tokenizer, tokenizer_id
        self.max_context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self.sampler = Sampler(copy.deepcopy(model).eval(), tokenizer)
        self.trainer = TrainingClients(model)
        self.store = checkpoints.Store(checkpoint_dir)
        self.sampling: dict[str, SamplingSession] = {}
        self._sessions = itertools.count(1)
        self.touched: dict[str, float] = {}

    # --- sessions, models -------------------------------------------------------------------------------
    def create_session(self) -> str:
        return f"session-{next(self._sessions)}"

    def check_base(self, base_model: str | None) -> None:
        if base_model not in (None, self.model_name):
            raise InputError(f"unknown base_model {base_model!r}; this server serves {self.model_name!r} "
                             "(get_server_capabilities lists it)", field="base_model")

    def create_model(self, session_id: str, model_seq_id: int, base_model: str, lora: dict | None) -> dict:
        self.check_base(base_model)
        lora = lora or {}
        lc = lora_config(int(lora.get("rank", 32)), lora.get("seed"), lora.get("train_attn", True),
                         lora.get("train_mlp", True), lora.get("train_unembed", True))
        model_id = f"{session_id}:train:{model_seq_id}"
        self.trainer.create(model_id, lc)
        self.touched[model_id] = time.time()
        return {"model_id": model_id, "type": "create_model"}

    def info(self, model_id: str) -> dict:
        client = self.trainer.client(model_id)
        return {"type": "get_info", "model_id": model_id, "is_lora": True, "lora_rank": client.lora.rank,
                "model_name": self.model_name,
                "model_data": {"arch": type(self.trainer.base).__name__, "model_name": self.model_name,
                               "tokenizer_id": self.tokenizer_id}}

    def capabilities(self) -> dict:
        return {"supported_models": [{"model_name": self.model_name, "max_context_length": self.max_context or None,
                                      "trainable": True, "sampleable": True}]}

    def training_runs(self, limit: int = 20, offset: int = 0) -> dict:
        """This server's training clients (oldest first) as Tinker's ``TrainingRunsResponse`` page."""
        ids = list(self.trainer.clients)
        page = ids[offset:offset + limit] if limit >= 0 and offset >= 0 else None
        if page is None:
            raise InputError(f"limit and offset must be >= 0, got {limit}, {offset}", field="limit")
        return {"training_runs": [self.training_run(m) for m in page],
                "cursor": {"offset": offset, "limit": limit, "total_count": len(ids)}}

    def training_run(self, model_id: str) -> dict:
        client = self.trainer.client(model_id)
        listing = self.store.listing(model_id)
        last = {ctype: next((c for c in reversed(listing) if c["checkpoint_type"] == ctype), None)
                for ctype in ("training", "sampler")}
        return {"training_run_id": model_id, "base_model": self.model_name, "model_owner": "local", "is_lora": True,
                "lora_rank": client.lora.rank, "corrupted": False,
                "last_request_time": checkpoints._iso(self.touched.get(model_id, time.time())),
                "last_checkpoint": last["training"], "last_sampler_checkpoint": last["sampler"]}

    # --- training ---------------------------------------------------------------------------------------
    def forward_backward(self, request: dict) -> tuple[list, dict]:
        self.touched[request["model_id"]] = time.time()
        return self.trainer.forward_backward(request["model_id"], request["data"], request["loss_fn"],
                                             request["config"], request["forward_only"])

    def optim_step(self, model_id: str, adam: dict) -> dict:
        self.touched[model_id] = time.time()
        return {"metrics": self.trainer.optim_step(model_id, adam), "type": "optim_step"}

    # --- weights ----------------------------------------------------------------------------------------
    def save_weights(self, model_id: str, name: str | None) -> dict:
        client = self.trainer.client(model_id)
        path = checkpoints.tinker_path(model_id, "weights", checkpoints.check_name(name or f"step-{client.steps}"))
        self.store.save(path, self.model_name, client.lora, self.trainer.state(model_id, optimizer=True))
        return {"path": path, "type": "save_weights"}

    def save_for_sampler(self, model_id: str, name: str | None, sampling_seq_id: int | None,
                         session_id: str) -> dict:
        client = self.trainer.client(model_id)
        adapter = self.trainer.adapter(model_id)
        if name is None:  # save_weights_and_get_sampling_client: an in-memory snapshot and its session
            sid = f"{session_id}:sample:{sampling_seq_id}"
            self.sampling[sid] = SamplingSession(f"{sid}@{client.steps}", adapter, self.model_name, None)
            return {"sampling_session_id": sid, "type": "save_weights_for_sampler"}
        path = checkpoints.tinker_path(model_id, "sampler_weights", checkpoints.check_name(name))
        state = {"adapter": {k: [a, b] for k, (a, b) in adapter.modules.items()}, "scale": adapter.scale,
                 "steps": client.steps}
        self.store.save(path, self.model_name, client.lora, state)
        return {"path": path, "type": "save_weights_for_sampler"}

    def load_weights(self, model_id: str | None, path: str, optimizer: bool, session_id: str | None = None,
                     model_seq_id: int | None = None) -> dict:
        meta, state = self.store.load(path)
        if checkpoints.parse(path)[1] != "weights":
            raise InputError(f"{path!r} holds sampler weights; load_state reads tinker://.../weights/NAME",
                             field="path")
        if model_id is None:  # create_training_client_from_state: a new client shaped like the checkpoint
            lc = LoRAConfig(**meta["lora"])
            model_id = f"{session_id}:train:{model_seq_id}"
            self.trainer.create(model_id, lc)
        if not optimizer:
            state = {**state, "optimizer": None}
        self.trainer.load_state(model_id, state)
        return {"path": path, "model_id": model_id, "type": "load_weights"}

    # --- sampling ---------------------------------------------------------------------------------------
    def create_sampling_session(self, session_id: str, seq_id: int, base_model: str | None,
                                model_path: str | None) -> str:
        sid = f"{session_id}:sample:{seq_id}"
        self.sampling[sid] = self._session_for(sid, base_model, model_path)
        return sid

    def _session_for(self, sid: str, base_model: str | None, model_path: str | None) -> SamplingSession:
        if model_path is None:
            self.check_base(base_model or self.model_name)
            return SamplingSession("base", BASE, self.model_name, None)
        meta, state = self.store.load(model_path)
        if "adapter" not in state:
            raise InputError(f"{model_path!r} holds training state; sample from tinker://.../sampler_weights/NAME",
                             field="model_path")
        adapter = LoraAdapter({k: (a, b) for k, (a, b) in state["adapter"].items()}, float(state["scale"]))
        return SamplingSession(model_path, adapter, meta["base_model"], model_path)

    def session(self, sid: str) -> SamplingSession:
        if sid not in self.sampling:
            raise InputError(f"unknown sampling session {sid!r}", field="sampling_session_id")
        return self.sampling[sid]

    def sample(self, request: dict) -> "SampleResult":
        """An ``asample`` request (its fields checked against :data:`trajkit.tinker.fields.FIELDS`) -> the
        samples, and the prompt's log-probs / top-k when asked: one scoring forward for both, on the training
        side's float32 model with the session's adapter unmerged, so they equal ``forward``'s."""
        fields.check("SampleRequest", request)
        params = request.get("sampling_params") or {}
        fields.check("SamplingParams", params, "sampling_params.")
        sid = request.get("sampling_session_id")
        s = self.session(sid) if sid else self._session_for("direct", request.get("base_model"),
                                                               request.get("model_path"))
        prompt = prompt_tokens(request.get("prompt") or {})
        want_lp, topk = bool(request.get("prompt_logprobs")), int(request.get("topk_prompt_logprobs") or 0)
        last_n = request.get("prompt_logprobs_last_n")
        sequences = self.sampler.sample(s.key, s.adapter, prompt, int(request.get("num_samples", 1)), params,
                                        int(request.get("topk_sample_logprobs") or 0))  # checks the prompt's ids
        scores = None
        if want_lp or topk:
            scores = prompt_scores(self.trainer.adapter_logprobs(s.adapter, prompt), prompt, topk,
                                   None if last_n is None else int(last_n))
        return SampleResult(sequences, scores if want_lp else None, scores if topk else None)


@dataclass
class SampleResult:
    sequences: list[Sequence]
    prompt: PromptScores | None = None  # prompt_logprobs asked: its ``logprobs``
    topk: PromptScores | None = None  # topk_prompt_logprobs asked: its ``topk_*``


def prompt_tokens(model_input: dict) -> list[int]:
    """A JSON ``ModelInput`` (``{"chunks": [{"type": "encoded_text", "tokens": [...]}, ...]}``) -> token ids."""
    tokens: list[int] = []
    for chunk in model_input.get("chunks", []):
        if chunk.get("type", "encoded_text") != "encoded_text":
            raise InputError(f"prompt chunk of type {chunk.get('type')!r}: this server takes token chunks only",
                             field="prompt")
        tokens.extend(int(t) for t in chunk["tokens"])
    if not tokens:
        raise InputError("the prompt has no tokens", field="prompt")
    return tokens
