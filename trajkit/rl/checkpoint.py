"""Checkpoints other tools can load, which also make a resumed run reproduce the next step exactly.

Layout of one checkpoint directory (``log.out_dir/checkpoints/step_000010/``)::

    policy/             save_pretrained: config.json, model.safetensors, generation_config.json,
                        tokenizer.json, tokenizer_config.json, chat_template.jinja
    draft/              the draft, saved by its kind in the drafter registry: for ``model`` a second
                        save_pretrained folder (with the same tokenizer), for ``window`` window.pt +
                        window.json; absent for kinds without weights (``ngram``) or without a draft
    trainer_state.pt    everything else a resumed step reads, as tensors, numbers, strings, lists and
                        dicts only, so ``torch.load(path, weights_only=True)`` reads it (no pickled code)

A LoRA run's ``policy/`` holds its adapter in peft's layout (``adapter_model.safetensors``,
``adapter_config.json``, the tokenizer): ``PeftModel.from_pretrained(base, ".../policy")`` loads it over
the base model. Otherwise ``policy/`` is a plain Hugging Face folder: ``AutoModelForCausalLM.from_pretrained`` and
``AutoTokenizer.from_pretrained`` load it with no trajkit code (and so can vLLM, ``vllm serve
.../policy``). When the model's generation config names no end-of-sequence or padding id, the saved one
takes them from the tokenizer, so ``generate`` there stops where trajkit's rollouts stop.

``trainer_state.pt`` holds: the format number, the step counter, the prompt stream's cursor, the policy's
optimiser state, the draft's kind and its optimiser state (when distilled), the mismatch alarm's history and
the global RNG states (torch, CUDA when present, Python ``random`` and numpy, converted to tensors and
numbers). Rollout randomness does not come from the global RNGs: each step's sampling seed is a function
of (run seed, step), so restoring the step counter restores it. The reference model is the initial
policy and is rebuilt from the config, not saved. With ``log.save_optimizer=false`` (TRL's
``save_only_model``) both optimiser states are left out (``None``): the checkpoint is the size of the
weights, and resuming from it starts the optimisers afresh (with a warning saying so).

Writes are atomic per directory: everything is written into a temporary sibling folder, synced, and
renamed into place; an interrupted save leaves the previous checkpoint as it was (the pattern of
:func:`trajkit.recipes.cache.building`, which keeps an existing folder instead of replacing it).

Deviation: checkpoints of the first format (one pickled ``state.pt``) are refused with a message saying
so; they would need ``weights_only=False``, i.e. running pickled code from a file.
"""
from __future__ import annotations

import copy
import os
import random
import shutil
import tempfile
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from trajkit.engine.drafters.registry import draft_kind
from trajkit.errors import ConfigError
from trajkit.models.load import load_model
from trajkit.rl.lora import is_lora, load_adapter
from trajkit.rl.learner import PolicySide
from trajkit.atomic import fsync_path

FORMAT = 2
POLICY, DRAFT, TRAINER_STATE = "policy", "draft", "trainer_state.pt"
OLD_STATE = "state.pt"  # format 1: one pickled file


def rng_state() -> dict:
    """The global RNG states as tensors and numbers (``weights_only`` loadable)."""
    version, internal, gauss_next = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64),
                       "gauss_next": gauss_next},
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}}


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["internal"].tolist()), py["gauss_next"]))
    nps = state["numpy"]
    np.random.set_state((nps["kind"], nps["keys"].numpy().astype(np.uint32), nps["pos"], nps["has_gauss"],
                         nps["cached_gaussian"]))


def trainer_state(side: PolicySide, counters: dict, sharded: bool = False) -> dict:
    """Everything of a run that is not model weights, as ``weights_only``-loadable values: the policy side's
    optimiser states and ``counters`` (:meth:`~trajkit.rl.state.TrainState.counters`: step, stream, alarm);
    ``sharded``: the policy's optimiser state is in the checkpoint's ``sharded/`` folder instead
    (:mod:`trajkit.rl.sharded_checkpoint`)."""
    keep = side.cfg.log.save_optimizer
    draft_opt = side.draft_optimizer
    return {"format": FORMAT, "step": counters["step"], "stream": counters["stream"],
            "optimizer": side.optimizer.state_dict() if keep and not sharded else None,
            "alarm": counters["alarm"], "sharded": sharded,
            "rng": rng_state(), "draft_kind": side.cfg.draft.kind if side.draft is not None else None,
            "draft_optimizer": draft_opt.state_dict() if keep and draft_opt is not None else None}


def counters_of(blob: dict) -> dict:
    """A checkpoint's ``trainer_state.pt`` -> the run's counters (``{"step", "stream", "alarm"}``)."""
    return {"step": int(blob["step"]), "stream": blob["stream"], "alarm": blob["alarm"]}


def save_checkpoint(side: PolicySide, tokenizer, counters: dict, path: str) -> str:
    """Write the checkpoint directory ``path`` (layout in the module docstring) of a run's policy side and
    counters (:meth:`~trajkit.rl.state.TrainState.counters`); returns ``path``."""
    with publishing(Path(path)) as tmp:
        save_hf(side.policy, tokenizer, tmp / POLICY)
        save_draft(side, tokenizer, tmp)
        torch.save(trainer_state(side, counters), tmp / TRAINER_STATE)
    return path


def save_draft(side: PolicySide, tokenizer, folder: Path) -> None:
    """The draft's weights into ``folder/draft`` (by its kind), when the run has a draft."""
    if side.draft is not None:
        draft_kind(side.cfg.draft.kind).save(side.draft, folder / DRAFT)
        if hasattr(side.draft, "save_pretrained"):  # an HF draft: a complete folder, tokenizer included
            tokenizer.save_pretrained(str(folder / DRAFT))


def save_hf(model, tokenizer, folder: Path, state_dict: dict | None = None) -> None:
    """``save_pretrained`` of model (its weights, or ``state_dict`` when given: a sharded model's gathered
    state) and tokenizer; the generation config gets the tokenizer's eos/pad ids where the model's names
    none (a copy is changed, never the live model)."""
    model.save_pretrained(str(folder), state_dict=state_dict)
    tokenizer.save_pretrained(str(folder))
    gen = copy.deepcopy(model.generation_config)
    if gen.eos_token_id is None and tokenizer.eos_token_id is not None:
        gen.eos_token_id = tokenizer.eos_token_id
    if gen.pad_token_id is None and tokenizer.pad_token_id is not None:
        gen.pad_token_id = tokenizer.pad_token_id
    gen.save_pretrained(str(folder))


def load_checkpoint(side: PolicySide, path: str) -> dict:
    """Restore the weights and optimisers :func:`save_checkpoint` wrote into an already built ``side`` (and
    the random generators); -> the run's counters, for :meth:`~trajkit.rl.state.TrainState.restore`."""
    folder = Path(path)
    blob = read_trainer_state(folder)
    if is_lora(side.policy):  # the adapter only (peft's layout); the base is rebuilt from the config
        load_adapter(side.policy, folder / POLICY)
    else:
        copy_weights(side.policy, load_model(folder / POLICY, dtype=_dtype(side.policy),
                                             what="checkpoint.resume_from policy/"))
    if blob.get("sharded"):  # written by a policy.fsdp run: weights and optimiser from sharded/, resharded to 1
        from trajkit.rl.fsdp import load_shards

        load_shards(side.policy, side.optimizer, folder)
    elif blob["optimizer"] is not None:
        side.optimizer.load_state_dict(blob["optimizer"])
    else:
        warnings.warn(f"checkpoint.resume_from: {str(folder)!r} was saved with log.save_optimizer=false; the "
                      "optimiser starts afresh (its moments are not in the checkpoint)", stacklevel=2)
    load_draft(side, folder, blob)
    set_rng_state(blob["rng"])
    return counters_of(blob)


def read_trainer_state(folder: Path) -> dict:
    """``trainer_state.pt`` of a checkpoint, loaded with ``weights_only=True``; clear errors for a missing
    folder, a first-format checkpoint, or one of another format number."""
    file = folder / TRAINER_STATE
    if not file.exists():
        if (folder / OLD_STATE).exists():
            raise ConfigError(f"checkpoint.resume_from: {str(folder)!r} is a checkpoint of an older trajkit format "
                              f"(one pickled {OLD_STATE}); this version reads {POLICY}/ + {TRAINER_STATE}. Resume "
                              "it with the trajkit version that wrote it, or start a new run")
        raise ConfigError(f"checkpoint.resume_from: no {TRAINER_STATE} in {str(folder)!r}; give a checkpoint "
                          "directory such as OUT_DIR/checkpoints/step_000010")
    blob = torch.load(file, weights_only=True)
    if blob.get("format") != FORMAT:
        raise ConfigError(f"checkpoint.resume_from: {str(file)!r} has format {blob.get('format')!r}; this trajkit "
                          f"reads format {FORMAT}")
    return blob


def load_draft(side: PolicySide, folder: Path, blob: dict) -> None:
    """The saved draft into ``side.draft`` (same kind only); a checkpoint without draft weights leaves the
    run's draft as built."""
    saved_kind = blob["draft_kind"]
    if side.draft is None or saved_kind is None:
        return
    if saved_kind != side.cfg.draft.kind:
        raise ConfigError(f"checkpoint.resume_from: the checkpoint's draft is draft.kind={saved_kind}, this run "
                          f"has draft.kind={side.cfg.draft.kind}; set draft.kind={saved_kind}")
    copy_weights(side.draft, draft_kind(saved_kind).load(folder / DRAFT, target=side.policy))
    if blob["draft_optimizer"] is not None and side.draft_optimizer is not None:
        side.draft_optimizer.load_state_dict(blob["draft_optimizer"])


def copy_weights(into: torch.nn.Module, loaded: torch.nn.Module) -> None:
    """Copy ``loaded``'s tensors into ``into`` in place (the optimiser keeps pointing at these parameters)."""
    with torch.no_grad():
        into.load_state_dict(loaded.state_dict())


def _dtype(model: torch.nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


@contextmanager
def publishing(path: Path):
    """Build into a temporary sibling of ``path``; on success sync it and rename it to ``path`` (an older
    folder there is moved aside first and removed after). On any error the temporary folder goes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".saving-{path.name}-", dir=path.parent))
    try:
        yield tmp
        _fsync_tree(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private
        old = path.with_name(f".old-{path.name}-{uuid.uuid4().hex[:8]}") if path.exists() else None
        if old is not None:
            os.rename(path, old)
        os.rename(tmp, path)
        fsync_path(path.parent, directory=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            fsync_path(Path(folder) / name)
        fsync_path(Path(folder), directory=True)


