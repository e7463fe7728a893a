"""LoRA training clients over one served base model: each its own adapter and its own AdamW.

One ``peft.PeftModel`` wraps the base model; every ``create_model`` adds a named LoRA adapter to it
(``rank``, ``seed``, ``train_attn``/``train_mlp``/``train_unembed`` -> :data:`trajkit.rl.lora.TARGET_MODULES`
groups) with its own AdamW, the RL trainer's (:data:`trajkit.optim.build.OPTIMIZERS` ``adamw``). An operation
activates its client's adapter first, so the other adapters take no part in its forward and their accumulated gradients are untouched:
``forward_backward`` calls accumulate into the adapter's ``.grad`` until ``optim_step`` (Tinker's
contract: a large batch arrives as several requests). Operations are not thread-safe; the server runs
them one at a time (:mod:`trajkit.tinker.futures`).

Per datum: ``logp[t] = log softmax(model(tokens)[t])[target_tokens[t]]`` (temperature 1), the loss of
:mod:`trajkit.tinker.losses`, summed over the datum's tokens and over the request's data (Tinker
reports it as ``loss:sum``). ``optim_step`` applies ``AdamParams`` (learning rate, betas, eps, decoupled
weight decay, checked as the trainer's ``optim`` section: :func:`adam_config`; ``grad_clip_norm`` > 0 clips
the adapter's gradient norm first).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from trajkit.engine.adapters import LoraAdapter
from trajkit.config import check_value
from trajkit.errors import ConfigError, InputError
from trajkit.optim.config import OptimConfig
from trajkit.rl.config import LoRAConfig
from trajkit.rl.lora import adapter_of, peft_config
from trajkit.optim.build import OPTIMIZERS
from trajkit.tinker.losses import INPUTS, loss_fn


@dataclass
class Datum:
    """One training example: ``tokens`` the model input, ``inputs`` its ``loss_fn_inputs`` (``target_tokens``
    int64 ``[N]``, the rest float32 ``[N]``, N = len(tokens))."""

    tokens: list[int]
    inputs: dict[str, torch.Tensor]


@dataclass
class Client:
    """One LoRA training client: its peft adapter name, LoRA settings, optimiser and counters."""

    adapter: str
    lora: LoRAConfig
    optimizer: torch.optim.Optimizer | None = None
    steps: int = 0
    pending: int = 0  # forward_backward calls since the last optim_step
    meta: dict = field(default_factory=dict)


# Tinker's AdamParams defaults (tinker 0.38.0 types.AdamParams), as the trainer's optim section
TINKER_ADAM = OptimConfig(lr=1e-4, beta1=0.9, beta2=0.95, eps=1e-12, weight_decay=0.0)


# AdamParams field -> (the AdamW group key, its interval: Tinker allows lr = 0, e.g. a warm-up's first step)
ADAM_FIELDS = {"learning_rate": ("lr", "[0, inf)"), "beta1": ("beta1", "[0, 1)"), "beta2": ("beta2", "[0, 1)"),
               "eps": ("eps", "[0, inf)"), "weight_decay": ("weight_decay", "[0, inf)")}


def adam_config(adam: dict) -> dict:
    """Tinker's ``AdamParams`` (a dict; absent or None fields take :data:`TINKER_ADAM`'s) as the values the
    step gives the AdamW group (``lr``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``); a value that is not a
    finite number in its interval is an :class:`InputError` naming its AdamParams field."""
    out = {ours: getattr(TINKER_ADAM, ours) for ours, _ in ADAM_FIELDS.values()}
    for theirs, (ours, interval) in ADAM_FIELDS.items():
        if adam.get(theirs) is None:
            continue
        try:
            out[ours] = check_value(theirs, float, adam[theirs], interval)
        except ConfigError as exc:
            raise InputError(str(exc), field=f"adam_params.{theirs}") from None
    return out


def lora_config(rank: int, seed: int | None, train_attn=True, train_mlp=True, train_unembed=True) -> LoRAConfig:
    """Tinker's ``LoraConfig`` as trajkit's (alpha = 32, Tinker's documented default scale)."""
    targets = [name for name, on in (("attention", train_attn), ("mlp", train_mlp), ("unembed", train_unembed))
               if on]
    if not targets:
        raise InputError("train_attn, train_mlp and train_unembed are all false: nothing to train",
                         field="lora_config")
    if rank < 1:
        raise InputError(f"rank must be >= 1, got {rank}", field="lora_config.rank")
    return LoRAConfig(rank=rank, alpha=32.0, targets=targets, seed=seed or 0)


class TrainingClients:
    """The training side of the server over ``base`` (a float32 HF causal LM it takes ownership of)."""

    def __init__(self, base: torch.nn.Module):
        self.base = base.float().train()
        self.model = None  # the PeftModel, made with the first client
        self.clients: dict[str, Client] = {}

    def create(self, model_id: str, lc: LoRAConfig) -> None:
        from peft import get_peft_model

        name = f"client{len(self.clients)}"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(lc.seed)
            if self.model is None:
                self.model = get_peft_model(self.base, peft_config(lc), adapter_name=name)
            else:
                self.model.add_adapter(name, peft_config(lc))
        client = Client(name, lc)
        client.optimizer = OPTIMIZERS["adamw"](self._params(client), TINKER_ADAM, TINKER_ADAM.lr)
        self.clients[model_id] = client

    def client(self, model_id: str) -> Client:
        if model_id not in self.clients:
            raise InputError(f"unknown model_id {model_id!r}; create it with create_lora_training_client",
                             field="model_id")
        return self.clients[model_id]

    def _params(self, client: Client) -> list[torch.nn.Parameter]:
        return [p for n, p in self.model.named_parameters() if f".{client.adapter}." in n]

    def _activate(self, client: Client) -> None:
        self.model.set_adapter(client.adapter)

    def logprobs(self, tokens: list[int], targets: torch.Tensor) -> torch.Tensor:
        """``[N]`` log-probs of ``targets`` after each prefix of ``tokens`` under the active adapter."""
        ids = torch.tensor([tokens], dtype=torch.long)
        logits = self.model(input_ids=ids).logits[0].float()
        return torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1)

    @torch.no_grad()
    def adapter_logprobs(self, adapter: LoraAdapter, tokens: list[int]) -> torch.Tensor:
        """``[N-1, V]`` float32 log-softmax after each prefix of ``tokens`` under the base model plus ``adapter``
        (a sampler snapshot or checkpoint, not necessarily a live client's): the clients' adapters off, each
        adapted layer's output plus ``scale * B(A(x))`` as peft adds it, so the values are ``forward``'s for
        the same adapter tensors (no merge rounding)."""
        peft = self.model is not None  # no client yet: the plain base model
        hf = self.model.get_base_model() if peft else self.base
        hooks = [hf.get_submodule(name).register_forward_hook(_lora_hook(a, b, adapter.scale))
                 for name, (a, b) in adapter.modules.items()]
        try:
            with self.model.disable_adapter() if peft else contextlib.nullcontext():
                logits = hf(input_ids=torch.tensor([tokens], dtype=torch.long)).logits
        finally:
            for h in hooks:
                h.remove()
        return torch.log_softmax(logits[0, :-1].float(), -1)

    def forward_backward(self, model_id: str, data: list[Datum], loss_name: str, config: dict,
                         forward_only: bool = False) -> tuple[list[torch.Tensor], dict]:
        """-> (per-datum ``logprobs [N]``, ``{"loss:sum": total}``); gradients accumulate unless ``forward_only``."""
        client = self.client(model_id)
        loss = loss_fn(loss_name)
        for i, d in enumerate(data):
            check_datum(d, i, loss_name, self.base.config.vocab_size)
        self._activate(client)
        out, total = [], 0.0
        with torch.set_grad_enabled(not forward_only):
            for d in data:
                logp = self.logprobs(d.tokens, d.inputs["target_tokens"])
                value = loss(logp, d.inputs, config)
                if not forward_only:
                    value.backward()
                total += float(value.detach())
                out.append(logp.detach())
        if not forward_only:
            client.pending += 1
        return out, {"loss:sum": total}

    def optim_step(self, model_id: str, adam: dict) -> dict:
        """One AdamW step of the client's adapter with Tinker's ``AdamParams`` ``adam``; grads then cleared."""
        client = self.client(model_id)
        params = self._params(client)
        clip = float(adam.get("grad_clip_norm", 0.0) or 0.0)
        grads = [p.grad for p in params if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))) if grads else 0.0
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        o = adam_config(adam)
        for group in client.optimizer.param_groups:
            group.update(lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"])
        client.optimizer.step()
        client.optimizer.zero_grad(set_to_none=True)
        client.steps += 1
        client.pending = 0
        return {"grad_norm:mean": norm}

    def adapter(self, model_id: str) -> LoraAdapter:
        """The client's adapter as an engine payload (plain HF module names)."""
        client = self.client(model_id)
        return adapter_of(self.model, client.adapter)

    def state(self, model_id: str, optimizer: bool) -> dict:
        """What a training checkpoint holds: the adapter's tensors (and the optimiser's state)."""
        client = self.client(model_id)
        names = [n for n, _ in self.model.named_parameters() if f".{client.adapter}." in n]
        tensors = {n.replace(f".{client.adapter}.", ".default."): p.detach().clone()
                   for n, p in zip(names, self._params(client))}
        return {"tensors": tensors, "optimizer": client.optimizer.state_dict() if optimizer else None,
                "steps": client.steps}

    def load_state(self, model_id: str, state: dict) -> None:
        """Copy a :meth:`state` into the client (same LoRA shape), and its optimiser's state when present."""
        client = self.client(model_id)
        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for key, value in state["tensors"].items():
                name = key.replace(".default.", f".{client.adapter}.")
                if name not in own or own[name].shape != value.shape:
                    raise InputError(f"checkpoint tensor {key!r} does not fit this client's LoRA "
                                     f"(rank {client.lora.rank}, targets {client.lora.targets})", field="path")
                own[name].copy_(value)
        if state.get("optimizer") is not None:
            client.optimizer.load_state_dict(state["optimizer"])
        client.steps = int(state.get("steps", 0))


def _lora_hook(a: torch.Tensor, b: torch.Tensor, scale: float):
    """A forward hook adding a LoRA term to a linear layer's output: ``out + B(A(x)) * scale`` (peft's order)."""
    def hook(_module, inputs, out):
        return out + torch.nn.functional.linear(torch.nn.functional.linear(inputs[0], a), b) * scale
    return hook


def check_datum(d: Datum, index: int, loss_name: str, vocab_size: int) -> None:
    """Every input the loss reads is present and has one value per token, and every token id is in the
    vocabulary (a user error otherwise)."""
    n = len(d.tokens)
    if n == 0:
        raise InputError(f"data[{index}].model_input has no tokens", field="model_input")
    ids = [*d.tokens, *d.inputs.get("target_tokens", torch.zeros(0, dtype=torch.long)).tolist()]
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise InputError(f"data[{index}]: token id {bad[0]} is outside the vocabulary (0..{vocab_size - 1})",
                         field="model_input")
    for key in ("target_tokens", *INPUTS.get(loss_name, ())):
        if key not in d.inputs:
            raise InputError(f"data[{index}].loss_fn_inputs has no {key!r}, which loss_fn {loss_name!r} needs",
                             field="loss_fn_inputs")
        if d.inputs[key].shape != (n,):
            raise InputError(f"data[{index}].loss_fn_inputs[{key!r}] has shape {tuple(d.inputs[key].shape)}, the "
                             f"model input has {n} tokens (one value per token)", field="loss_fn_inputs")
