"""The trainer's side of the engine: inference copies, weight sync, and grouped generation.

The engine (:class:`trajkit.engine.Engine`) owns an *inference copy* of the policy, separate from the
weights the optimiser updates; the ``weight_sync`` stage pushes the policy's ``state_dict`` into it
(``Engine.update_weights``) and, with a draft model, copies the trained draft into the drafter's own
copy (the "draft refresh"; on the vLLM backend, into vLLM's drafter: ``update_draft``). Generation repeats each prompt ``G`` times (a group) and runs the task's
environment; every row's random stream is derived by the engine from the step's seed and the row index,
so a step's rollouts are a pure function of (weights, prompts, seed). The engine's copy of the policy
is stored in ``policy.dtype`` on the policy's device (:mod:`trajkit.rl.precision`); ``weight_sync``
casts the float32 master weights into it.

Every environment gets the rollout's :class:`~trajkit.envs.client.GenerationClient` as its ``generate``: the
backend, :attr:`Rollout.lock` (which ``sync`` holds too) and the step's counters, explicitly. Every call
through the client holds the lock, and one that serves the backend to outside programs (the gateway of
:mod:`trajkit.envs.agent`) holds it around its engine calls too (it is reentrant), so a weight sync waits
for a running call to drain and every record carries the version of the weights that sampled it; such an
environment sets each sample's ``policy_version`` from its records. ``run`` fills in the version of the
run's first call where an environment left it unknown (-1), and each sampled token's (``token_versions``)
where every call of the run had one version. A weight push between two calls of a multi-turn episode
(``rollout.mode=async``) lets the episode continue under the new weights: an environment that stamps
``token_versions`` itself (the tool environment does, from each call's ``policy_version``) records it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch

from trajkit.engine import Engine, GenerationStats, SamplingParams
from trajkit.errors import ConfigError
from trajkit.rl.backend import build_backend
from trajkit.rl.build import frozen_copy
from trajkit.rl.config import TrainConfig
from trajkit.rl.lora import adapter_of, inference_copy, is_lora
from trajkit.rl.precision import DTYPES
from trajkit.envs.client import GenerationClient
from trajkit.envs.sample import Sample
from trajkit.envs.base import Prompt, Task


@dataclass(eq=False)
class CountingClient(GenerationClient):
    """A :class:`GenerationClient` that keeps the stats of its calls (``calls``, cleared by :meth:`Rollout.run`
    with ``versions`` at the start of a batch)."""

    calls: list[GenerationStats] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.record = self.calls.append


class Rollout:
    """The run's backend (``rollout.backend``) built from inference copies of ``policy`` and ``draft``;
    ``engine`` is trajkit's engine when the backend is (None for another backend)."""

    def __init__(self, cfg: TrainConfig, policy, draft=None, backend=None):
        self.cfg = cfg
        if backend is not None and backend.name != cfg.rollout.backend:
            raise ConfigError(f"rollout.backend={cfg.rollout.backend} but the given backend is {backend.name!r}; "
                              f"set rollout.backend={backend.name}")
        trajkit = cfg.rollout.backend == "trajkit" and backend is None
        copy_of = inference_copy if is_lora(policy) else frozen_copy
        infer = copy_of(policy).to(DTYPES[cfg.policy.dtype]) if backend is None else None
        self.draft_infer = frozen_copy(draft) if draft is not None and trajkit else None
        if self.draft_infer is not None and callable(getattr(self.draft_infer, "bind", None)):
            # an EAGLE head drafts from the engine's copy: its shared parts follow every weight sync
            self.draft_infer.bind(infer).to(DTYPES[cfg.policy.dtype])
        self.owns_backend = backend is None  # a given backend is the caller's to close
        self.backend = backend if backend is not None else build_backend(cfg, infer, self.draft_infer)
        self.engine: Engine | None = self.backend.engine
        self.lock = threading.RLock()  # held by sync, by every client call and a gateway's (module docstring)
        # what every environment generates with (module docstring); the same object every round
        self.client = CountingClient(self.backend, self.lock)
        self.eval_client = GenerationClient(self.backend, self.lock)  # evaluation: not in the step's counters
        self.step_of: dict[int, int] = {}  # backend policy version -> the trainer step of those weights

    def push(self, learner, step: int) -> None:
        """The ``weight_sync`` stage through ``learner`` (:meth:`Learner.push_weights`); the backend's new
        version stands for the policy after ``step`` updates (:attr:`step_of`), atomically for a generating
        thread (``rollout.mode=async``: :mod:`trajkit.rl.producer`)."""
        with self.lock:
            learner.push_weights(self)
            self.step_of[self.backend.policy_version] = step

    def trained_steps(self, version: int) -> int:
        """The trainer step of the weights a backend ``version`` sampled with (-1: pushed outside :meth:`push`)."""
        return self.step_of.get(version, -1)

    def sync(self, policy, draft=None) -> None:
        """The ``weight_sync`` stage: policy -> engine copy (a LoRA policy's adapters only, merged there:
        :mod:`trajkit.rl.lora`); trained draft -> drafter copy."""
        if is_lora(policy):
            if not self.backend.capabilities.adapters:
                raise ConfigError(f"policy.lora: backend {self.backend.name!r} takes no adapter-only sync "
                                  "(Capabilities.adapters); train the full policy, or use rollout.backend=trajkit")
            with self.lock:
                self.backend.update_adapter(adapter_of(policy))
            if draft is not None and self.draft_infer is not None:
                self.load_draft(draft.state_dict())
            return
        self.load(policy.state_dict(), draft.state_dict() if draft is not None else None)

    def load(self, policy_state: dict, draft_state: dict | None = None) -> int:
        """:meth:`sync` from state dicts (a Ray rollout worker gets them from the object store); -> the
        backend's new policy version."""
        with self.lock:
            version = self.backend.update_weights(policy_state)
            if draft_state is not None and self.draft_infer is None and self.cfg.draft.distill:
                self.backend.update_draft(draft_state)  # vLLM's drafter refit (trajkit.backends.vllm)
        if draft_state is not None and self.draft_infer is not None:
            self.load_draft(draft_state)
        return version

    def load_draft(self, draft_state: dict) -> None:
        """The trained draft's weights into the drafter's copy (trajkit's engine)."""
        with torch.no_grad():
            self.draft_infer.load_state_dict(draft_state)

    @property
    def calls(self) -> list[GenerationStats]:
        """This step's generate calls through :attr:`client` (a tool episode makes several)."""
        return self.client.calls

    def batch_client(self, round_no: int | None = None) -> "CountingClient":
        """A client of one batch's own (its calls and versions apart from another batch's) on this backend
        and lock: what the asynchronous producer gives each of its batches; ``round_no``: the round number
        it reserved for the batch's environment (:attr:`GenerationClient.round`)."""
        return CountingClient(self.backend, self.lock, round=round_no)

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams):
        """One counted backend call (:attr:`client` as a method)."""
        return self.client(prompt_ids, params)

    def run(self, task: Task, rows: list[Prompt], group_size: int, params: SamplingParams,
            keep_calls: bool = False, client: "CountingClient | None" = None) -> list[Sample]:
        """One episode per row; rows ``g*G .. g*G+G-1`` (the same prompt repeated) form group ``g``.
        ``keep_calls``: add to this step's generate counters (a refill round) instead of starting anew.
        ``client``: the batch's own (:meth:`batch_client`), else :attr:`client`."""
        client = self.client if client is None else client
        if not keep_calls:
            client.calls.clear()
            client.versions.clear()
        first = len(client.versions)
        samples = self.episodes(task, rows, params, client)
        versions = client.versions[first:] or [self.backend.policy_version]
        for i, s in enumerate(samples):
            s.group = i // group_size
            if s.policy_version < 0:
                s.policy_version = min(versions)
            if s.token_versions is None and len(set(versions)) == 1:  # one version sampled every call
                s.token_versions = [versions[0] if m else -1 for m in s.loss_mask]
        return samples

    def episodes(self, task: Task, rows: list[Prompt], params: SamplingParams,
                 client: GenerationClient) -> list[Sample]:
        """``task``'s episodes of ``rows`` through ``client`` (:attr:`client`, or :attr:`eval_client`). An
        environment that serves generation (the agent and Harbor tasks' gateway) runs where the generation
        runs: on a backend of Ray rollout workers, each worker runs its slice of the rows over its own backend
        (:meth:`trajkit.cluster.split.RayRollouts.episodes`), and their calls' counters and versions are
        added to ``client``'s; every other environment runs here, calling the backend through ``client``."""
        if not self.backend.capabilities.episodes or not getattr(task.env, "serves_generation", False):
            return task.env.rollout(client, rows, params)
        # a worker runs one call at a time: a weight load sent during the round waits for its end
        round_no, timeout_s = task.env.next_round(client), getattr(task.env, "timeout_s", None)
        samples, stats, versions = self.backend.episodes(rows, params, round_no, timeout_s)
        for s in stats:
            client.record(s)
        client.versions.extend(versions)
        task.env.check_round(samples)
        return samples

    def close(self) -> None:
        """Release the backend's workers (vLLM's actor) when this rollout built it."""
        if self.owns_backend:
            self.backend.close()

    def metrics(self, client: "CountingClient | None" = None) -> dict:
        """The engine's counters over this step's generate calls (through ``client``, else :attr:`client`),
        as ``gen/*`` metrics."""
        calls = (self.client if client is None else client).calls
        s = GenerationStats.merge(*calls)
        return {"gen/acceptance_length": s.mean_acceptance_length, "gen/acceptance_rate": s.acceptance_rate,
                "gen/alpha": s.alpha, "gen/tokens": s.new_tokens, "gen/target_calls": s.target_calls,
                "gen/tokens_per_s": s.tokens_per_second, "gen/k": s.num_draft_tokens,
                "gen/calls": len(calls),
                **prefill_metrics(s, self.backend.num_params)}


def prefill_metrics(s: GenerationStats, num_params: int | None) -> dict:
    """Prefill reuse as ``gen/*`` metrics: prompt tokens, of which served by the prefix cache (``prefix_hit``),
    copied from an identical prompt of the same call (``shared_prompt``: a GRPO group's G - 1 other rows)
    and computed (``prefill``); the token-weighted hit rate of both reuses, and the FLOPs not spent
    (~ 2 x params per token not prefilled, ``num_params`` the backend's; left out when it is None: a backend
    that does not report its size)."""
    reused = s.prefix_hit_tokens + s.shared_prompt_tokens
    out = {"gen/prompt_tokens": s.prompt_tokens, "gen/prefill_tokens": s.prefill_tokens,
           "gen/prefix_hit_tokens": s.prefix_hit_tokens, "gen/shared_prompt_tokens": s.shared_prompt_tokens,
           "gen/prefill_reuse_rate": reused / s.prompt_tokens if s.prompt_tokens else 0.0}
    if num_params is not None:
        out["gen/prefill_flops_saved"] = 2 * num_params * reused
    return out
