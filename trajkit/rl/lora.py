"""LoRA policies (``policy.lora.rank`` > 0): peft adapters on a frozen model, synced adapter-only.

The policy becomes a ``peft.PeftModel`` (Hu et al. 2021; peft's ``LoraConfig``) with adapters on the
linear layers of ``policy.lora.targets``; the base weights are frozen, so the loss, the optimiser
(AdamW over the trainable parameters) and the gradient clip see only ``A`` and ``B``. Everything else in
the step is unchanged: the losses take the peft model's log-probs like a full model's.

Weight sync (:meth:`trajkit.rl.rollout.Rollout.sync`) sends only the adapters
(:func:`adapter_of` -> :class:`trajkit.engine.adapters.LoraAdapter`), which the engine merges into its
copy of the base model; that copy is built by :func:`inference_copy` (the merged model as a plain HF
model). Checkpoints hold the adapter in peft's own layout (``policy/adapter_model.safetensors`` +
``adapter_config.json``, loadable with ``PeftModel.from_pretrained(base, folder)``); resuming reads it
back into the live adapters (:func:`load_adapter`).

Deviations: the adapters' init draws from a generator seeded by ``policy.lora.seed`` (peft draws from the
global RNG), so a run and its reference test build the same adapters.
"""
from __future__ import annotations

import copy
from pathlib import Path

import torch

from trajkit.engine.adapters import LoraAdapter
from trajkit.errors import ConfigError

# the linear layers of each ``policy.lora.targets`` group (Llama/Qwen2/SmolLM2 names)
TARGET_MODULES = {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
                  "mlp": ("gate_proj", "up_proj", "down_proj"),
                  "unembed": ("lm_head",)}
ADAPTER_FILE = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."


def peft_config(lc):
    """peft's ``LoraConfig`` for a :class:`trajkit.rl.config.LoRAConfig`."""
    from peft import LoraConfig

    modules = [m for group in lc.targets for m in TARGET_MODULES[group]]
    return LoraConfig(r=lc.rank, lora_alpha=lc.alpha, lora_dropout=lc.dropout, target_modules=modules,
                      bias="none", task_type="CAUSAL_LM")


def wrap(model: torch.nn.Module, lc) -> torch.nn.Module:
    """``model`` with LoRA adapters of ``lc`` (its weights frozen), the adapters initialised from ``lc.seed``."""
    from peft import get_peft_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(lc.seed)
        try:
            return get_peft_model(model, peft_config(lc))
        except ValueError as exc:  # peft: no target module found in the model
            raise ConfigError(f"policy.lora.targets={lc.targets}: {exc}") from exc


def is_lora(model) -> bool:
    """Whether ``model`` is a peft LoRA model (the policy of a ``policy.lora.rank`` > 0 run)."""
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


def adapter_of(model, name: str = "default") -> LoraAdapter:
    """The live adapter ``name`` of a peft LoRA ``model`` as a sync payload (detached float32 CPU copies)."""
    from peft.tuners.lora import LoraLayer

    modules, scales = {}, set()
    for path, layer in model.named_modules():
        if not isinstance(layer, LoraLayer) or name not in layer.lora_A:
            continue
        a = layer.lora_A[name].weight.detach().float().cpu().clone()
        b = layer.lora_B[name].weight.detach().float().cpu().clone()
        modules[path.removeprefix(PEFT_PREFIX)] = (a, b)
        scales.add(float(layer.scaling[name]))
    if len(scales) > 1:
        raise ConfigError(f"LoRA adapters with different scales {sorted(scales)}: one alpha/rank per policy")
    return LoraAdapter(modules, scale=scales.pop() if scales else 1.0)


def inference_copy(model) -> torch.nn.Module:
    """A frozen plain HF copy of a peft ``model`` with its adapters merged (the engine's copy)."""
    out = copy.deepcopy(model).merge_and_unload().eval()
    for p in out.parameters():
        p.requires_grad_(False)
    return out


def load_adapter(model, folder: Path) -> None:
    """Copy the adapter saved in ``folder`` (``save_pretrained`` of a peft model) into ``model``'s adapters."""
    from peft.utils import set_peft_model_state_dict
    from safetensors.torch import load_file

    file = Path(folder) / ADAPTER_FILE
    if not file.exists():
        raise ConfigError(f"checkpoint.resume_from: no {ADAPTER_FILE} in {str(folder)!r}: the checkpoint was not "
                          "saved by a LoRA run (policy.lora.rank > 0); resume it with policy.lora.rank=0")
    result = set_peft_model_state_dict(model, load_file(str(file)))
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise ConfigError(f"checkpoint.resume_from: the saved adapter has modules this run's policy.lora has "
                          f"not ({unexpected[0]!r}...); use the policy.lora settings of the run that saved it")
