"""The difficulty-aware task sampler (``rollout.sampler=difficulty``): draw the items whose pass rate under
the current policy is strictly between 0 and 1, where a GRPO group has signal.

A group of G samples of an item with pass rate p is all-same (zero advantage, no gradient) with probability
``p**G + (1 - p)**G``: 0.74 at p = 0.93 for G = 4, 0.125 at p = 0.5. The sampler keeps a pass-rate estimate
per item and draws by it:

    items     the distinct prompts (rendered text and columns) among ``sampler.max_items`` stream indices:
              a finite train split's (a dataset, a verifiers task list) spread evenly over it, ``i * size
              // cap`` (rows sorted by a column would otherwise give their first categories only), an
              endless stream's first ones (Harbor's seeded draws of its tasks among them); a drawn item is
              ``task.prompt(its first index)``
    profile   before the first step, K = ``sampler.profile_samples`` samples of the current policy per item,
              through the step's rollout path (the rollout's engine, the task's environment and rewards),
              in batches of ``prompts_per_step * group_size`` rows; their cost is ``sampler/profile_trials``
    update    every group the RL step generates (dynamic sampling's refills too) adds its G outcomes; the
              estimate p is the mean over an item's last ``sampler.window`` outcomes. An outcome is
              "solved" when the raw reward reaches ``shaping.correct_threshold``, the scoring's test
              (unscorable rewards are no evidence)
    pools     informative 0 < p < 1, solved p = 1 (set aside), unsolved p = 0, unprofiled (no outcome)
    draw      ``take(n)``: ``floor`` of a running credit of ``sampler.unsolved_share * n`` unsolved items
              (uniform), the rest informative or unprofiled ones without replacement, weighted
              ``(p (1 - p)) ** sharpness`` (an unprofiled item counts as p = 0.5); a pool too small is
              filled from the unsolved, then the solved items, then by repeating items
    plateau   re-profile every item when, at least N = ``sampler.plateau_steps`` steps' groups after the
              last profile, fewer than ``prompts_per_step`` items are left to draw from or the share of the
              last N steps' groups that were all-same reached ``sampler.plateau_all_same``; a profile that
              leaves fewer than ``prompts_per_step`` items to draw from doubles the wait (up to 32 N
              steps), one that leaves enough resets it, so a policy that solves everything is not
              profiled again every N steps
    refill    with ``sampler.refill_rounds`` R > 0, after every profile up to R rounds: the items found
              solved are retired (never drawn or profiled again) and as many fresh items take their
              places, each profiled with K samples; fresh items are the next distinct prompts of the train
              split never in the pool (by :func:`item_key`), in the order of a walk over it: an endless
              stream's indices after the first ``max_items``, a finite split's ``j * stride mod size`` for
              j = 0, 1, ... (``stride`` the integer nearest ``0.618 size`` that is coprime with it, so the
              walk visits every row once, spread over the whole list); a walk that finds nothing new (a
              finite split's end, or ``16 max_items`` indices in a row of an endless stream) stops for good
              and a solved item without a replacement stays in the pool
    top-up    with ``sampler.refill_below`` b > 0, between profiles: before a draw, when fewer than b x the
              pool's items are left to draw from (informative or unprofiled) and replacing the items whose
              window says solved (their RL groups: with a window of one group, a group of G all solved)
              would bring it back to b, the refill's rounds run from those items without profiling the
              others again (the first round pushes the current policy), and the plateau's wait restarts;
              the pool keeps its headroom at a cost of K trials per fresh item, where a plateau would wait
              until fewer than ``prompts_per_step`` items are left and then profile all. Fresh items that
              the last round finds solved are replaced at the next draw if the pool is still low; under
              dynamic sampling a top-up can come at a refill's draw, mid-step

The weight ``p (1 - p)`` is the variance of a Bernoulli reward, the "learnability" of Tzannetos et al. /
Foster & Foerster (2025, "Learning to reason at the frontier of learnability"). The probe-and-filter
schedule follows Agent Lightning (4 probe rollouts per task, the all-solved dropped) and NVIDIA's Nemotron
pipeline (profile with the starting checkpoint, set the always-solved aside, re-profile when progress
stalls); prime-rl's difficulty-pool buffer sorts items into easy / normal / hard by their last group.
Deviations: the estimate is a window over several groups, not the last group alone, and informative items
are weighted instead of drawn uniformly.

Deterministic for a seed: every random choice comes from the sampler's own ``torch.Generator`` seeded
from the run seed, and the profile's sampling seeds from (run seed, step, batch). Its state (the items,
their outcome windows, the generator, the unsolved credit, the plateau history) is the stream's state in
the checkpoint, so a resumed run draws what the uninterrupted run draws. It implements the
:class:`~trajkit.rl.state.PromptStream` interface (``take``, ``drain_rows``, ``state_dict``), plus
``observe`` (the step's hook) and ``metrics`` (``sampler/*``). A dataset task's ``data/rows`` are not
logged: the sampler repeats rows by design, which ``trajkit audit run``'s once-per-epoch check refuses.
"""
from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Sequence

import torch

from trajkit.envs.base import ENDLESS, Prompt, Task
from trajkit.errors import ConfigError
from trajkit.rl.sampler_config import SamplerConfig

SEED_SALT = 0x5A3D_1F0B  # the sampler's generator: manual_seed(run seed * 1_000_003 + SEED_SALT)

# (prompts, samples per prompt, batch number, first batch of a profile) -> one raw reward per row, the rows
# of a prompt consecutive; the batch number counts every profile batch of the run (each its own seed)
Profiler = Callable[[list[Prompt], int, int, bool], list[float]]


def pass_rates(windows: Sequence[Sequence[int]]) -> list[float | None]:
    """Each item's mean outcome over its window (None: no outcome yet).

    >>> pass_rates([[1, 1, 0, 0], [], [1]])
    [0.5, None, 1.0]
    """
    return [sum(w) / len(w) if w else None for w in windows]


def pool_of(rate: float | None) -> str:
    """``"unprofiled"``, ``"unsolved"`` (0), ``"solved"`` (1) or ``"informative"`` (strictly between)."""
    if rate is None:
        return "unprofiled"
    return "unsolved" if rate == 0.0 else "solved" if rate == 1.0 else "informative"


def pool_sizes(rates: Sequence[float | None]) -> dict[str, int]:
    """How many items each pool holds, and ``"left"``: the items left to draw from (informative or unprofiled).

    >>> pool_sizes([0.5, None, 1.0, 1.0])
    {'informative': 1, 'solved': 2, 'unsolved': 0, 'unprofiled': 1, 'left': 2}
    """
    sizes = dict.fromkeys(("informative", "solved", "unsolved", "unprofiled"), 0)
    for rate in rates:
        sizes[pool_of(rate)] += 1
    return {**sizes, "left": sizes["informative"] + sizes["unprofiled"]}


def draw_weight(rate: float | None, sharpness: float) -> float:
    """``(p (1 - p)) ** sharpness`` for an informative item (unprofiled: p = 0.5); 0 for the other pools.

    >>> [draw_weight(p, 1.0) for p in (0.5, 0.25, 1.0, None)]
    [0.25, 0.1875, 0.0, 0.25]
    """
    if pool_of(rate) not in ("informative", "unprofiled"):
        return 0.0
    p = 0.5 if rate is None else rate
    return (p * (1.0 - p)) ** sharpness


def unsolved_quota(credit: float, share: float, n: int) -> tuple[int, float]:
    """``(unsolved items in a draw of n, the credit carried)``: the running credit gains ``share * n`` and
    gives out its whole part, so over many draws exactly ``share`` of the items are unsolved ones.

    >>> unsolved_quota(0.0, 0.25, 4), unsolved_quota(0.0, 0.1, 8), unsolved_quota(0.8, 0.1, 8)
    ((1, 0.0), (0, 0.8), (1, 0.6000000000000001))
    """
    credit += share * n
    whole = math.floor(credit + 1e-9)
    return whole, max(0.0, credit - whole)


def item_key(prompt: Prompt) -> str:
    """What makes two stream prompts the same item: the rendered text and the row's columns."""
    return prompt.text + "\x00" + json.dumps(prompt.columns, sort_keys=True, default=str)


class DifficultySampler:
    """The stream of ``rollout.sampler=difficulty`` over ``task``'s train split (module docstring).
    ``profiler`` runs the profile's episodes (:func:`rollout_profiler`; set by the trainer once its rollout
    exists); ``correct_threshold``: the scoring's; ``batch``: ``prompts_per_step`` (the plateau's pool floor
    and the profile's batch is ``batch * group_size`` rows)."""

    def __init__(self, task: Task, cfg: SamplerConfig, seed: int, correct_threshold: float, batch: int,
                 group_size: int, profiler: Profiler | None = None):
        self.task, self.cfg, self.threshold = task, cfg, correct_threshold
        self.batch, self.group_size, self.profiler = batch, group_size, profiler
        self.rng = torch.Generator().manual_seed(seed * 1_000_003 + SEED_SALT)
        self.items: list[int] | None = None  # the first stream index of each item, built on first use
        self.windows: list[list[int]] = []
        self.index_of: dict[int, int] = {}  # stream index -> item
        self.credit = 0.0
        self.recent: deque[int] = deque(maxlen=max(1, cfg.plateau_steps * batch))  # 1 = an all-same group
        self.since_profile = 0  # groups observed since the last profile
        self.pending = cfg.profile_samples > 0  # the first profile is still to run
        self.profiles, self.trials_total, self.trials_step = 0, 0, 0
        self.top_ups = 0  # refills between profiles (``sampler.refill_below``)
        self.batches = 0  # profile batches run so far (each samples with its own seed)
        self.backoff = 1  # the plateau's wait, in N steps' groups: doubled after a profile that found too few
        self.cursor, self.committed, self.rows = 0, None, []  # PromptStream's attributes: draws so far
        self.walk, self.exhausted = 0, False  # the refill's next walk position; True once it found nothing
        self.retired: list[int] = []  # the stream index of every retired item
        self.keys: set[str] = set()  # item_key of every item in the pool or retired

    # -- the stream's interface -------------------------------------------------------------------
    def take(self, n: int) -> list[Prompt]:
        """``n`` prompts by difficulty; profiles first when due (the initial pass, or a plateau), or tops the
        pool up when it runs low."""
        self._ensure_items()
        if self.pending or self.plateau():
            self.profile()
        elif self.running_low():
            self.top_up()
        chosen = self.choose(n)
        self.cursor += n
        return [self.task.prompt(self.items[j]) for j in chosen]

    def drain_rows(self) -> list[int]:
        return []

    def observe(self, indices: Sequence[int], rewards: Sequence[float], group_size: int) -> None:
        """The outcomes of groups the step generated: ``indices[i]`` is group i's prompt index, its rewards
        ``rewards[i * G:(i + 1) * G]`` (raw, before shaping)."""
        for i, index in enumerate(indices):
            solved = [float(r) >= self.threshold for r in rewards[i * group_size:(i + 1) * group_size]]
            self.recent.append(int(len(set(solved)) == 1))
            self.since_profile += 1
            item = self.index_of.get(int(index))
            if item is not None:
                scored = [r for r in rewards[i * group_size:(i + 1) * group_size] if not math.isnan(float(r))]
                self._record(item, [int(float(r) >= self.threshold) for r in scored])

    def metrics(self) -> dict:
        """The pools, the mean estimated pass rate over profiled items, and the profiling cost (this step's
        trials, then zeroed, and the run's)."""
        rates = pass_rates(self.windows)
        known = [r for r in rates if r is not None]
        out = {f"sampler/{k}": float(v) for k, v in pool_sizes(rates).items() if k != "left"}
        out.update({"sampler/items": float(len(rates)),
                    "sampler/mean_pass_rate": sum(known) / len(known) if known else math.nan,
                    "sampler/profile_trials": float(self.trials_step),
                    "sampler/profile_trials_total": float(self.trials_total),
                    "sampler/profiles": float(self.profiles), "sampler/retired": float(len(self.retired)),
                    "sampler/top_ups": float(self.top_ups)})
        self.trials_step = 0
        return out

    # -- estimates, pools, draws ------------------------------------------------------------------
    def _ensure_items(self) -> None:
        if self.items is not None:
            return
        size = _train_size(self.task)
        count = self.cfg.max_items if size is None else min(self.cfg.max_items, size)
        seen: dict[str, int] = {}
        for index in (range(count) if size is None else (i * size // count for i in range(count))):
            seen.setdefault(item_key(self.task.prompt(index)), index)
        if not seen:
            raise ConfigError("rollout.sampler=difficulty: the task's train split has no prompts to draw")
        self._set_items(list(seen.values()), [[] for _ in seen])
        self.keys, self.walk = set(seen), self._first_walk()

    def _first_walk(self) -> int:
        """Where the refill's walk starts: after the scanned indices of an endless stream, 0 of a finite one."""
        return self.cfg.max_items if _train_size(self.task) is None else 0

    def _set_items(self, items: list[int], windows: list[list[int]]) -> None:
        self.items, self.windows = items, windows
        self.index_of = {index: j for j, index in enumerate(items)}

    def _record(self, item: int, outcomes: list[int]) -> None:
        self.windows[item] = (self.windows[item] + outcomes)[-self.cfg.window:]

    def choose(self, n: int) -> list[int]:
        """The items of one draw of ``n`` (module docstring, "draw")."""
        rates = pass_rates(self.windows)
        pools = {name: [j for j, r in enumerate(rates) if pool_of(r) == name]
                 for name in ("informative", "unprofiled", "unsolved", "solved")}
        quota, self.credit = unsolved_quota(self.credit, self.cfg.unsolved_share, n)
        picked = self._uniform(pools["unsolved"], min(quota, len(pools["unsolved"])))
        drawable = pools["informative"] + pools["unprofiled"]
        weights = [draw_weight(rates[j], self.cfg.sharpness) for j in drawable]
        picked = self._weighted(drawable, weights, min(n - len(picked), len(drawable))) + picked
        for name in ("unsolved", "solved"):
            rest = [j for j in pools[name] if j not in picked]
            picked += self._uniform(rest, min(n - len(picked), len(rest)))
        while len(picked) < n:  # fewer items than a draw: repeat them
            picked += self._uniform(list(range(len(rates))), min(n - len(picked), len(rates)))
        return picked

    def _weighted(self, items: list[int], weights: list[float], k: int) -> list[int]:
        if k <= 0:
            return []
        order = torch.multinomial(torch.tensor(weights, dtype=torch.float64), k, replacement=False,
                                  generator=self.rng)
        return [items[i] for i in order.tolist()]

    def _uniform(self, items: list[int], k: int) -> list[int]:
        if k <= 0:
            return []
        order = torch.randperm(len(items), generator=self.rng)[:k]
        return [items[i] for i in order.tolist()]

    # -- profiling ----------------------------------------------------------------------------------
    def plateau(self) -> bool:
        """Whether the pool has run dry or the groups stopped carrying signal (module docstring)."""
        need = self.cfg.plateau_steps * self.batch
        if need == 0 or self.since_profile < need * self.backoff:
            return False
        left = pool_sizes(pass_rates(self.windows))["left"]
        return left < self.batch or sum(self.recent) / len(self.recent) >= self.cfg.plateau_all_same

    def profile(self) -> None:
        """K samples of every item through :attr:`profiler`, replacing their windows (K = 0: the windows are
        cleared, every item unprofiled again), then the refill's rounds (module docstring)."""
        k = self.cfg.profile_samples
        if k > 0:
            self._profile_items(list(range(len(self.items))), push=True)
            self._refill_rounds(push=False)
        else:
            self.windows = [[] for _ in self.windows]
        left = pool_sizes(pass_rates(self.windows))["left"]
        self.backoff = 1 if left >= self.batch else min(2 * self.backoff, MAX_BACKOFF)
        self.pending, self.since_profile = False, 0
        self.recent.clear()
        self.profiles += 1

    def running_low(self) -> bool:
        """Whether a top-up is due: fewer than ``b = sampler.refill_below`` x the pool's items left to draw
        from, a solved item to replace, enough of them to bring the pool back to b (the unsolved items, never
        replaced between profiles, could hold it under b for good, and each newly solved item would then top
        up) and a walk that can still find fresh ones (module docstring, "top-up")."""
        if self.cfg.refill_below <= 0 or self.exhausted:
            return False
        sizes = pool_sizes(pass_rates(self.windows))
        floor = self.cfg.refill_below * len(self.windows)
        return sizes["left"] < floor and sizes["solved"] > 0 and sizes["left"] + sizes["solved"] >= floor

    def top_up(self) -> None:
        """The refill's rounds from the items solved now, the others' windows kept; one that replaced an item
        restarts the plateau's wait (its all-same history is of the groups before)."""
        self._need_profiler()
        if self._refill_rounds(push=True):
            self.top_ups += 1
            self.since_profile = 0
            self.recent.clear()

    def _refill_rounds(self, push: bool) -> int:
        """Up to ``sampler.refill_rounds`` rounds: the solved items retired, fresh ones profiled in their places;
        the number of items replaced."""
        replaced = 0
        for _ in range(self.cfg.refill_rounds):
            fresh = self._refill()
            if not fresh:
                break
            self._profile_items(fresh, push=push)
            push, replaced = False, replaced + len(fresh)
        return replaced

    def _need_profiler(self) -> None:
        if self.profiler is None:
            raise ConfigError("rollout.sampler=difficulty: the sampler has no profiler (build the run with "
                              "trajkit.rl.trainer.build_state, which gives it the rollout's)")

    def _profile_items(self, positions: list[int], push: bool) -> None:
        """K samples of the items at ``positions``, in batches of ``prompts_per_step * group_size`` rows (the
        first pushes the current policy to the engine when ``push``); their windows become the outcomes."""
        self._need_profiler()
        k = self.cfg.profile_samples
        per_batch = max(1, self.batch * self.group_size // k)
        for start in range(0, len(positions), per_batch):
            chunk = positions[start:start + per_batch]
            prompts = [self.task.prompt(self.items[j]) for j in chunk]
            rewards = self.profiler(prompts, k, self.batches, push and start == 0)
            self.batches += 1
            for i, j in enumerate(chunk):
                scored = [r for r in rewards[i * k:(i + 1) * k] if not math.isnan(float(r))]
                self.windows[j] = [int(float(r) >= self.threshold) for r in scored][-self.cfg.window:]
            self.trials_step += len(chunk) * k
            self.trials_total += len(chunk) * k

    def _refill(self) -> list[int]:
        """Retire the solved items that a fresh item can replace, the fresh ones in their places (unprofiled);
        their positions."""
        solved = [j for j, rate in enumerate(pass_rates(self.windows)) if pool_of(rate) == "solved"]
        fresh = self._fresh(len(solved))
        for j, index in zip(solved, fresh):
            self.retired.append(self.items[j])
            del self.index_of[self.items[j]]
            self.items[j], self.windows[j], self.index_of[index] = index, [], j
        return solved[:len(fresh)]

    def _fresh(self, n: int) -> list[int]:
        """Up to ``n`` stream indices of prompts never in the pool, from the walk (module docstring, "refill")."""
        size = _train_size(self.task)
        stride = walk_stride(size) if size is not None else 1
        found: list[int] = []
        misses = 0
        while len(found) < n and not self.exhausted:
            done = self.walk >= size if size is not None else misses >= SCAN_MISSES * self.cfg.max_items
            if done:
                self.exhausted = True
                break
            index = self.walk * stride % size if size is not None else self.walk
            self.walk += 1
            key = item_key(self.task.prompt(index))
            if key in self.keys:
                misses += 1
                continue
            self.keys.add(key)
            found.append(index)
            misses = 0
        return found

    # -- checkpoint ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs to draw what this one draws, ``weights_only``-loadable."""
        width = self.cfg.window
        grid = torch.full((len(self.windows), width), -1, dtype=torch.int8)
        for j, w in enumerate(self.windows):
            grid[j, :len(w)] = torch.tensor(w, dtype=torch.int8)
        return {"kind": "difficulty", "cursor": self.cursor, "items": list(self.items or []),
                "built": self.items is not None, "windows": grid, "rng": self.rng.get_state(),
                "credit": self.credit, "recent": list(self.recent), "since_profile": self.since_profile,
                "pending": self.pending, "profiles": self.profiles, "trials_total": self.trials_total,
                "batches": self.batches, "backoff": self.backoff, "walk": self.walk, "exhausted": self.exhausted,
                "retired": list(self.retired), "top_ups": self.top_ups}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != "difficulty":
            raise ConfigError("checkpoint.resume_from: the checkpoint was written with rollout.sampler=uniform "
                              "(its stream is a cursor); resume it with rollout.sampler=uniform")
        self.retired = [int(i) for i in state.get("retired", [])]  # absent: a checkpoint from before the refill
        if state["built"]:
            windows = [[int(v) for v in row if v >= 0] for row in state["windows"].tolist()]
            self._set_items([int(i) for i in state["items"]], windows)
            self.keys = {item_key(self.task.prompt(i)) for i in self.items + self.retired}
        self.walk = int(state.get("walk", self._first_walk()))
        self.exhausted = bool(state.get("exhausted", False))
        self.cursor, self.credit = int(state["cursor"]), float(state["credit"])
        self.rng.set_state(state["rng"])
        self.recent.clear()
        self.recent.extend(int(v) for v in state["recent"])
        self.since_profile, self.pending = int(state["since_profile"]), bool(state["pending"])
        self.profiles, self.trials_total = int(state["profiles"]), int(state["trials_total"])
        self.batches, self.backoff = int(state["batches"]), int(state["backoff"])
        self.top_ups = int(state.get("top_ups", 0))  # absent: a checkpoint from before the top-up


def _train_size(task: Task) -> int | None:
    """The train split's size, None for an endless stream (a synthetic task: no ``num_prompts``, or one that
    answers ``ENDLESS`` or more)."""
    count = getattr(task, "num_prompts", None)
    size = count("train") if count is not None else None
    return None if size is None or size >= ENDLESS else size


def rollout_profiler(t) -> Profiler:
    """The profile's episodes for the run state ``t`` (a :class:`~trajkit.rl.state.TrainState`): the current
    policy pushed to the engine (once per profile), the step's sampling parameters with a seed of (run seed,
    step, the run's profile batch number), the
    task's environment through the evaluation client (not in the step's ``gen/*`` counters) and the run's
    rewards (the task's, also under ``shaping.control=random``)."""
    from trajkit.models.chat import stop_token_ids
    from trajkit.rl.dynamic import round_seed
    from trajkit.rl.step import rollout_params, step_seed

    def run(prompts: list[Prompt], k: int, number: int, first: bool) -> list[float]:
        if first:
            t.rollout.push(t.learner, t.step)
        rows = [p for p in prompts for _ in range(k)]
        seed = round_seed(step_seed(t.cfg.seed, t.step), PROFILE_ROUND + number)
        params = rollout_params(t.cfg, seed, stop_token_ids(t.tokenizer))
        samples = t.rollout.episodes(t.task, rows, params, t.rollout.eval_client)
        rewards, _ = t.rewards(samples)
        return [float(r) for r in rewards]
    return run


MAX_BACKOFF = 32  # the longest plateau wait: 32 x N steps' groups
SCAN_MISSES = 16  # the refill's walk over an endless stream stops after 16 x max_items indices with nothing new
PROFILE_ROUND = 1 << 12  # the profile's batch b samples with round_seed(step seed, PROFILE_ROUND + b)


def walk_stride(size: int) -> int:
    """The refill's step over a finite split of ``size`` rows: the integer nearest ``0.618 size`` (the golden
    ratio's, which spreads consecutive steps over the list), raised until it is coprime with ``size``.

    >>> walk_stride(12), [j * walk_stride(12) % 12 for j in range(12)]
    (7, [0, 7, 2, 9, 4, 11, 6, 1, 8, 3, 10, 5])
    """
    stride = max(1, round(size * 0.6180339887))
    while math.gcd(stride, size) != 1:
        stride += 1
    return stride


def make_stream(cfg, task: Task):
    """The run's prompt stream: the uniform cursor stream, or the difficulty sampler (``rollout.sampler``)."""
    from trajkit.rl.state import PromptStream

    if cfg.rollout.sampler == "uniform":
        return PromptStream(task)
    return DifficultySampler(task, cfg.sampler, cfg.seed, cfg.shaping.correct_threshold,
                             cfg.rollout.prompts_per_step, cfg.rollout.group_size)
