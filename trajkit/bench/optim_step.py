"""The step both ``trajkit bench optim`` tables run: the model, its loss, and this process's peak memory."""
from __future__ import annotations

import resource
import sys

# architectures with random weights (SmolLM2-360M-Instruct's config.json; the tokenizer is SmolLM2's)
MODELS = {"smollm2-135m": None,
          "smollm2-360m-shape": {"hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32,
                                 "num_attention_heads": 15, "num_key_value_heads": 5, "head_dim": 64}}
M_MMAP_THRESHOLD = -3  # glibc mallopt parameter


def mmap_large_allocations() -> bool:
    """glibc: allocations >= 128 KiB are mmapped (and unmapped when freed); False where unavailable."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024))
    except (OSError, AttributeError):
        return False


def load_bench_model(name: str, device, empty: bool = False):
    """The benchmark's model in float32, train mode; ``empty``: built on the meta device instead (no storage:
    a sharded rank > 0, which receives its shard from rank 0)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trajkit.models.load import empty_model
    from trajkit.recipes.smollm2 import prepare_model

    folder = str(prepare_model())
    if MODELS[name] is None:
        if empty:
            return empty_model(folder, what="the benchmark's model").train()
        return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device).train()
    config = AutoConfig.from_pretrained(folder)
    for key, value in MODELS[name].items():
        setattr(config, key, value)
    with torch.random.fork_rng(devices=[]), torch.device("meta" if empty else "cpu"):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return (model if empty else model.to(device)).train()


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB. Linux: ``VmHWM`` of ``/proc/self/status`` (the
    high-water mark of this process image; ``ru_maxrss`` would carry over the parent's peak across the
    fork + exec that starts the arm); elsewhere ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def pg_loss(model, ids, adv, logits_chunk: int = 0):
    """Token-level policy-gradient loss, summed (the caller divides by the step's token count)."""
    import torch

    if logits_chunk:
        from trajkit.models.logprobs import chunked_logprobs

        logp = chunked_logprobs(model, ids, None, 1.0, logits_chunk)
    else:
        logits = model(input_ids=ids).logits[:, :-1].float()
        logp = -torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
    return -(adv[:, None] * logp).sum()


def trainer_optimizer(model, name: str, lr: float, **knobs):
    """The RL trainer's own optimiser ``name`` (:data:`trajkit.optim.build.OPTIMIZERS`, the one registry) over
    ``model``, at the trainer's ``optim`` defaults (:class:`~trajkit.optim.config.OptimConfig`: AdamW's betas
    (0.9, 0.99), no weight decay, ...) but ``lr`` and ``knobs`` (settings of the optimiser's own section,
    ``optim.NAME``): what a benchmark arm measures is what ``trajkit train`` steps."""
    from trajkit.config import from_dict
    from trajkit.optim.config import OptimConfig
    from trajkit.optim.build import OPTIMIZERS as TRAINER_OPTIMIZERS

    tree = {"name": name, "lr": lr, **({name: knobs} if knobs else {})}
    return TRAINER_OPTIMIZERS[name](model, from_dict(OptimConfig, tree, "optim"), lr)


# each arm's optimiser over ``model`` (LoRA wraps the model first): (model, rank, lr) -> (model, optimiser)
def _adamw(model, rank: int, lr: float):
    return model, trainer_optimizer(model, "adamw", lr)


def _lora(model, rank: int, lr: float):
    """The RL trainer's LoRA (:func:`trajkit.rl.lora.wrap`: peft on the seven projections), alpha = 2 x rank,
    stepped by the trainer's AdamW (the frozen base weights get no gradient, so no state)."""
    from trajkit.rl.config import LoRAConfig
    from trajkit.rl.lora import wrap

    model = wrap(model, LoRAConfig(rank=rank, alpha=2.0 * rank, targets=["attention", "mlp"]))
    return model, trainer_optimizer(model, "adamw", lr)


def _logra(embeddings: str):
    def make(model, rank: int, lr: float):
        return model, trainer_optimizer(model, "logra", lr, rank=rank, embeddings=embeddings)
    return make


def _muon(model, rank: int, lr: float):
    return model, trainer_optimizer(model, "muon", lr)


OPTIMIZERS = {"adamw": _adamw, "lora": _lora, "logra": _logra("rows"), "logra-nested": _logra("adamw"), "muon": _muon}
