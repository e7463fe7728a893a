"""Checkpoints of a sharded (``policy.fsdp=true``) run: :mod:`trajkit.rl.checkpoint`'s layout plus the shards.

    policy/             save_pretrained of the gathered weights, written once by rank 0: the same plain
                        Hugging Face folder as an in-process run's (transformers and vLLM load it as is)
    draft/              a fixed draft's weights, as in process
    sharded/            torch.distributed.checkpoint (DCP): the policy's weights and AdamW state, one file
                        per rank plus DCP's metadata, keyed by parameter name
    trainer_state.pt    as in process, with ``"sharded": True`` and no optimiser state of its own

DCP reshards on load, so a checkpoint of N ranks resumes on M ranks, and in one process (the
in-process :func:`trajkit.rl.checkpoint.load_checkpoint` reads ``sharded/`` when ``"sharded"`` is set). The
folder is published atomically by rank 0 (:func:`trajkit.rl.checkpoint.publishing`): every rank writes its
shard into rank 0's temporary folder, so the ranks must share a filesystem (one node, or a shared mount).
An FSDP run resumes only from a checkpoint written by one (its optimiser state is keyed by parameter name;
an in-process checkpoint's by position).
"""
from __future__ import annotations

from pathlib import Path

import torch

from trajkit.errors import ConfigError
from trajkit.rl.checkpoint import (
    POLICY,
    TRAINER_STATE,
    counters_of,
    load_draft,
    publishing,
    read_trainer_state,
    save_draft,
    save_hf,
    set_rng_state,
    trainer_state,
)

def save_checkpoint(side, tokenizer, counters: dict, path: str, save_shards) -> str:
    """Rank 0: write the checkpoint directory ``path`` of rank 0's ``side`` (its shard of the policy side, and
    the draft) and the run's ``counters``; ``save_shards(folder)``: every rank writes its shard into ``folder``
    (rank 0's call also releases the peers) -> the gathered policy state dict."""
    with publishing(Path(path)) as tmp:
        full = save_shards(str(tmp))
        save_hf(side.policy, tokenizer, tmp / POLICY, state_dict=full)
        save_draft(side, tokenizer, tmp)
        torch.save(trainer_state(side, counters, sharded=True), tmp / TRAINER_STATE)
    return path


def load_checkpoint(side, path: str, load_shards) -> dict:
    """Rank 0: restore a sharded checkpoint (``load_shards(folder)``: every rank loads its shard; the draft here)
    -> the run's counters."""
    folder = Path(path)
    blob = check_sharded(read_trainer_state(folder), path)
    load_shards(str(folder))
    load_draft(side, folder, blob)
    set_rng_state(blob["rng"])
    return counters_of(blob)


def check_sharded(blob: dict, path) -> dict:
    """``blob`` (a checkpoint's trainer state) if a sharded run wrote it, else a :class:`ConfigError`."""
    if not blob.get("sharded"):
        raise ConfigError(f"checkpoint.resume_from: {str(path)!r} was written by an unsharded run; a "
                          "policy.fsdp=true run resumes from a checkpoint of a policy.fsdp=true run (any number "
                          "of ranks), or set policy.fsdp=false")
    return blob
