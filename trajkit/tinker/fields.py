"""Every field of every request the server accepts: handled, ignored (with the reason) or refused.

Read from the SDK's request types (tinker 0.38.0, ``tinker/types/*.py``; ``forward_backward``'s from its
protobuf schema), not from memory; ``tests/tinker/test_fields.py`` enumerates those types' fields and fails
when one is in none of the three sets, so an SDK that grows a field makes the test name it.

- **handled**: the server reads it and does what the SDK's docstring says.
- **ignored**: bookkeeping that cannot change a result here (ids, metadata, TTLs), accepted and dropped;
  the reason is stated.
- **refused**: a value other than the listed defaults is a user error naming the field (never a silent
  ``None``); the default is what the SDK sends when the caller did not ask for the feature.

:func:`check` applies one type's sets to a JSON body; keys outside all three are refused too (a field a
newer SDK sends that this server has never heard of).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from trajkit.errors import InputError


@dataclass(frozen=True)
class Fields:
    handled: frozenset[str]
    ignored: dict[str, str] = field(default_factory=dict)  # field -> why dropping it changes nothing here
    refused: dict[str, tuple] = field(default_factory=dict)  # field -> the values accepted (the SDK's defaults)
    aliases: dict[str, str] = field(default_factory=dict)  # wire name -> field name (pydantic aliases)

    def names(self) -> set[str]:
        return set(self.handled) | set(self.ignored) | set(self.refused)


def _h(*names: str) -> frozenset[str]:
    return frozenset(names)


SEQ_ID = "orders a client's requests in the SDK; this server runs requests in arrival order"
META = "metadata, not stored"
TTL = "checkpoints are kept until their folder is deleted"
ADAMW = ({"type": "adamw"}, None)
NOT_SAMPLED = "the sampling fields this server does not compute"

FIELDS: dict[str, Fields] = {
    "SampleRequest": Fields(
        _h("num_samples", "prompt", "sampling_params", "base_model", "model_path", "sampling_session_id",
           "prompt_logprobs", "topk_prompt_logprobs", "topk_sample_logprobs", "prompt_logprobs_last_n", "type"),
        ignored={"seq_id": SEQ_ID},
        refused={"target_prompt_logprobs": (None,), "prompt_alt_tokens_k": (0, None),
                 "record_stability_info": (None, False)}),
    "SamplingParams": Fields(_h("max_tokens", "seed", "stop", "temperature", "top_k", "top_p")),
    "CreateModelRequest": Fields(
        _h("session_id", "model_seq_id", "base_model", "lora_config", "type"),
        ignored={"user_metadata": META},
        refused={"optimizer_config": ADAMW}),
    "LoraConfig": Fields(_h("rank", "seed", "train_unembed", "train_mlp", "train_attn")),
    "OptimStepRequest": Fields(_h("optim_params", "model_id", "type"), ignored={"seq_id": SEQ_ID},
                               aliases={"adam_params": "optim_params", "optimizer_params": "optim_params"}),
    "AdamParams": Fields(_h("learning_rate", "beta1", "beta2", "eps", "weight_decay", "grad_clip_norm")),
    "SaveWeightsRequest": Fields(
        _h("model_id", "path", "type"),
        ignored={"seq_id": SEQ_ID, "ttl_seconds": TTL, "user_metadata": META,
                 "overwrite": "a name saved again is overwritten whatever it says"}),
    "SaveWeightsForSamplerRequest": Fields(
        _h("model_id", "path", "sampling_session_seq_id", "type"),
        ignored={"seq_id": SEQ_ID, "ttl_seconds": TTL, "user_metadata": META},
        refused={"kind": ("snapshot", None)}),
    "LoadWeightsRequest": Fields(
        _h("model_id", "session_id", "model_seq_id", "base_model", "path", "optimizer", "type"),
        ignored={"seq_id": SEQ_ID, "user_metadata": META},
        refused={"optimizer_config": ADAMW, "weights_access_token": (None,)}),
    "CreateSamplingSessionRequest": Fields(
        _h("session_id", "sampling_session_seq_id", "base_model", "model_path", "type")),
    "CreateSessionRequest": Fields(
        _h("type"), ignored={k: "session metadata, not stored (one local user)"
                             for k in ("tags", "user_metadata", "sdk_version", "project_id", "display_name")}),
    "GetInfoRequest": Fields(_h("model_id", "type")),
    "FutureRetrieveRequest": Fields(
        _h("request_id"), ignored={"allow_metadata_only": "the full result is always sent"}),
    "SessionHeartbeatRequest": Fields(_h("type"), ignored={"session_id": "sessions do not expire here"}),
    # forward_backward arrives as protobuf (tinker_public_pb2.ForwardBackwardRequest and its Datum)
    "ForwardBackwardRequest": Fields(
        _h("model_id", "data", "loss_fn", "loss_fn_config", "loss_fn_config_v2", "forward_only"),
        ignored={"seq_id": SEQ_ID}),
    "Datum": Fields(_h("model_input", "loss_fn_inputs"),
                    refused={"model_input_spans": ((),), "loss_fn_input_spans": ((),)}),
}
"""Request type (the SDK's class name) -> its fields. Not here: telemetry and client config bodies (dropped
whole) and ``weights_info``'s (the SDK sends ``{"tinker_path": ...}`` with no type; the route reads that key)."""

WHY = {
    "target_prompt_logprobs": "scoring chosen ids at prompt positions is not implemented (prompt_logprobs and "
                              "topk_prompt_logprobs are)",
    "prompt_alt_tokens_k": "drawing alternative prompt tokens is not implemented",
    "record_stability_info": "StableReinforce's stability records are not implemented (nor is its loss)",
    "optimizer_config": "this server trains with AdamW only",
    "weights_access_token": "checkpoints are local folders; there are no access tokens",
    "kind": "only 'snapshot' sampler weights are implemented",
    "model_input_spans": "provenance spans feed StableReinforce, which this server does not implement",
    "loss_fn_input_spans": "provenance spans feed StableReinforce, which this server does not implement",
}


def check(kind: str, body: dict, where: str = "") -> None:
    """Refuse ``body``'s fields that type ``kind`` does not handle or ignore (see the module docstring)."""
    spec = FIELDS[kind]
    for key, value in body.items():
        name = spec.aliases.get(key, key)
        path = f"{where}{key}"
        if name in spec.handled or name in spec.ignored:
            continue
        if name in spec.refused:
            if _plain(value) in [_plain(v) for v in spec.refused[name]]:
                continue
            raise InputError(f"{kind}.{name}={_short(value)}: {WHY.get(name, 'not implemented by this server')}; "
                             f"trajkit's Tinker server refuses it rather than ignore it (docs/tinker.md)", field=path)
        raise InputError(f"{kind} has a field {key!r} that trajkit's Tinker server does not know (an SDK newer "
                         "than 0.38.0?); it refuses it rather than ignore it", field=path)


def _plain(value):
    """Lists and tuples compare alike (protobuf repeated fields arrive as either)."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
