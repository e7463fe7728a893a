"""The Tinker API's protobuf messages, decoded and encoded with the schema the SDK ships.

The SDK (tinker 0.38.0) sends ``forward_backward`` as a protobuf ``ForwardBackwardRequest``
(``Content-Type: application/x-protobuf``) and asks for ``ForwardBackwardOutput`` and ``SampleResponse``
results as protobuf (``Accept: application/x-protobuf``; it refuses JSON for those two). Their schema is
the SDK's ``tinker/proto/tinker_public_pb2`` module, imported here (the server needs the SDK installed:
``pip install 'trajkit[tinker]'``). Encodings, as the schema's comments state them: token chunks are int32
bytes; a ``Tensor`` is dense bytes (float32 or int64) or sparse CSR with a shape; a ``BatchedTensor``
concatenates every datum's values, ``offsets`` the int64 byte offsets of each datum's start (N + 1 of
them); sampled tokens int32 bytes, their log-probs float32 bytes.
"""
from __future__ import annotations

import numpy as np
import torch

from trajkit.errors import InputError
from trajkit.tinker import fields
from trajkit.tinker.sampling import EMPTY_LOGPROB
from trajkit.tinker.training import Datum

_NUMPY = {1: np.float32, 2: np.int64, 3: np.int32}  # DType enum values (DTYPE_FLOAT32, INT64, INT32)


def pb():
    try:
        from tinker.proto import tinker_public_pb2
    except ImportError as exc:
        raise InputError("the Tinker server needs the tinker SDK's protobuf schema: pip install "
                         "'trajkit[tinker]' (tinker==0.38.0)") from exc
    return tinker_public_pb2


def _tensor(msg, where: str) -> torch.Tensor:
    dtype = _NUMPY.get(msg.dtype)
    if dtype is None:
        raise InputError(f"unsupported tensor dtype {msg.dtype}", field=where)
    shape = list(msg.shape)
    if msg.HasField("sparse_csr"):
        csr = msg.sparse_csr
        values = np.frombuffer(csr.values, dtype=dtype)
        crow = np.frombuffer(csr.crow_indices, dtype=np.int64)
        col = np.frombuffer(csr.col_indices, dtype=np.int64)
        dense = np.zeros(shape, dtype=dtype)
        for r in range(len(crow) - 1):
            dense[r, col[crow[r]:crow[r + 1]]] = values[crow[r]:crow[r + 1]]
        arr = dense
    else:
        arr = np.frombuffer(msg.dense, dtype=dtype)
        if shape:
            if int(np.prod(shape)) != arr.size:
                raise InputError(f"tensor of shape {shape} has {arr.size} values", field=where)
            arr = arr.reshape(shape)
    out = torch.from_numpy(arr.copy())
    return out.long() if dtype != np.float32 else out


def _tokens(datum, where: str) -> list[int]:
    tokens: list[int] = []
    for chunk in datum.model_input:
        kind = chunk.WhichOneof("chunk")
        if kind != "encoded_text":
            raise InputError(f"model_input chunk of kind {kind!r}: this server takes token chunks only", field=where)
        tokens.extend(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist())
    return tokens


def decode_forward_backward(body: bytes) -> dict:
    """``ForwardBackwardRequest`` bytes -> ``{model_id, seq_id, loss_fn, config, forward_only, data}``."""
    msg = pb().ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # protobuf's DecodeError
        raise InputError(f"forward_backward body is not a ForwardBackwardRequest: {exc}", field="body") from None
    config = {k: v for k, v in msg.loss_fn_config.items()}
    for k, v in msg.loss_fn_config_v2.items():
        config[k] = v.text if v.WhichOneof("value") == "text" else v.number
    data = []
    for i, d in enumerate(msg.data):
        fields.check("Datum", {k: tuple(getattr(d, k)) for k in ("model_input_spans", "loss_fn_input_spans")},
                     f"data[{i}].")
        inputs = {k: _tensor(t, f"data[{i}].loss_fn_inputs[{k}]") for k, t in d.loss_fn_inputs.items()}
        inputs = {k: (v if k == "target_tokens" else v.float()) for k, v in inputs.items()}
        data.append(Datum(_tokens(d, f"data[{i}].model_input"), inputs))
    return {"model_id": msg.model_id, "seq_id": msg.seq_id, "loss_fn": msg.loss_fn, "config": config,
            "forward_only": msg.forward_only, "data": data}


def _batched(arrays: list[np.ndarray]):
    out = pb().BatchedTensor()
    flat = [np.ascontiguousarray(a, dtype=np.float32).ravel() for a in arrays]
    out.data = b"".join(a.tobytes() for a in flat)
    out.offsets = np.cumsum([0] + [a.nbytes for a in flat], dtype=np.int64).tobytes()
    out.dtype = pb().DTYPE_FLOAT32
    return out


def encode_forward_backward(logprobs: list[torch.Tensor], metrics: dict) -> bytes:
    """Per-datum ``logprobs [N]`` and the metrics -> ``ForwardBackwardOutput`` bytes (one ArrayRecord)."""
    msg = pb().ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    record = msg.loss_fn_outputs.add()
    record.num_datums = len(logprobs)
    record.fields["logprobs"].CopyFrom(_batched([lp.numpy() for lp in logprobs]))
    for key, value in metrics.items():
        msg.metrics[key] = float(value)
    return msg.SerializeToString()


def _topk(msg, ids, logprobs) -> None:
    """A ``TopkLogprobs`` message: row-major ``[length, k]`` int32 ids and float32 log-probs."""
    msg.SetInParent()  # present even when empty: the SDK tells "asked, nothing" from "not asked"
    msg.length, msg.k = len(ids), len(ids[0]) if ids else 0
    msg.token_ids = np.asarray(ids, dtype=np.int32).tobytes()
    msg.logprobs = np.asarray(logprobs, dtype=np.float32).tobytes()


def encode_sample(result) -> bytes:
    """A :class:`trajkit.tinker.service.SampleResult` -> ``SampleResponse`` bytes (prompt log-probs float32
    with NaN where unscored; top-k as ``TopkLogprobs``, empty cells id 0 / log p -99999)."""
    p = pb()
    msg = p.SampleResponse()
    for s in result.sequences:
        seq = msg.sequences.add()
        seq.stop_reason = p.STOP_REASON_STOP if s.stop_reason == "stop" else p.STOP_REASON_LENGTH
        seq.tokens = np.asarray(s.tokens, dtype=np.int32).tobytes()
        seq.logprobs = np.asarray(s.logprobs, dtype=np.float32).tobytes()
        if s.topk is not None:
            k = max((len(row) for row in s.topk), default=0)
            ids = [[t for t, _ in row] + [0] * (k - len(row)) for row in s.topk]
            lps = [[v for _, v in row] + [EMPTY_LOGPROB] * (k - len(row)) for row in s.topk]
            _topk(seq.topk_sampled_logprobs, ids, lps)
    if result.prompt is not None:
        msg.prompt_logprobs = np.asarray(result.prompt.logprobs, dtype=np.float32).tobytes()
    if result.topk is not None:
        _topk(msg.topk_prompt_logprobs, result.topk.topk_ids, result.topk.topk_logprobs)
    return msg.SerializeToString()
