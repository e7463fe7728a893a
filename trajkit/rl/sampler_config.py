"""The difficulty sampler's settings (the ``sampler`` section; :mod:`trajkit.rl.sampler` is the mechanism).
Kept apart from the sampler so that reading a config never imports torch."""
from __future__ import annotations

from dataclasses import dataclass

from trajkit.config import Checked
from trajkit.errors import ConfigError


@dataclass
class SamplerConfig(Checked):
    """What ``rollout.sampler=difficulty`` draws (:mod:`trajkit.rl.sampler`).

    ``max_items``: the items are the distinct prompts among the train split's first ``max_items`` stream
    indices (a dataset's rows, a Harbor/verifiers task list, a synthetic task's first draws).
    ``profile_samples`` (K): samples of the current policy per item before the first step and on every
    re-profile (0: no profiling pass; every item starts unprofiled and the RL groups estimate it).
    ``window``: the pass-rate estimate is the mean correctness over an item's last ``window`` samples
    (profile samples and RL groups; ``>= profile_samples``). ``sharpness``: an informative item's draw weight
    is ``(p (1 - p)) ** sharpness`` (0: uniform over informative items; larger: closer to p = 0.5).
    ``unsolved_share``: the share of each draw given to items never solved in their window (p = 0).
    ``plateau_steps`` (N, 0: never re-profile) and ``plateau_all_same``: re-profile every item when, with at
    least N steps' groups (N x ``rollout.prompts_per_step``) observed since the last profile, the items left
    to draw from (informative or unprofiled) are fewer than ``rollout.prompts_per_step``, or the share of
    those last groups whose correctness was all the same reached ``plateau_all_same``; a profile that
    leaves too few items to draw from doubles that wait (up to 32 N steps), one that leaves enough resets it.
    ``refill_rounds`` (0: off): after every profile, up to this many rounds of retiring the items it found
    solved and profiling as many fresh ones in their place, the next distinct prompts of the train split that
    were never in the pool, so that the pool stays ``max_items`` items with headroom instead of shrinking to
    what the policy has not learned yet (each round costs K samples of each fresh item).
    ``refill_below`` (0: off; needs ``refill_rounds`` >= 1): between profiles, before a draw, when fewer than
    ``refill_below`` x the pool's items are left to draw from (informative or unprofiled) and some item's
    window says solved, the refill's rounds run on those items alone (a top-up: retired, fresh ones profiled
    in their places), without profiling the rest of the pool again, so the pool does not run dry while
    the plateau waits for it to."""

    max_items: int = 256
    profile_samples: int = 4
    window: int = 16
    sharpness: float = 1.0
    unsolved_share: float = 0.1
    plateau_steps: int = 5
    plateau_all_same: float = 0.8
    refill_rounds: int = 0
    refill_below: float = 0.0

    __section__ = "sampler"
    __ranges__ = {"max_items": "[1, inf)", "profile_samples": "[0, inf)", "window": "[1, inf)",
                  "sharpness": "[0, inf)", "unsolved_share": "[0, 1]", "plateau_steps": "[0, inf)",
                  "plateau_all_same": "(0, 1]", "refill_rounds": "[0, inf)",
                  "refill_below": "[0, 1]"}

    def validate(self) -> None:
        if self.profile_samples == 1:
            raise ConfigError("sampler.profile_samples=1 can only say solved or unsolved, never in between; set "
                              "it to 0 (no profiling pass) or >= 2 (4 is the usual probe)")
        if self.refill_rounds > 0 and self.profile_samples == 0:
            raise ConfigError(f"sampler.refill_rounds={self.refill_rounds} replaces the items a profile finds "
                              "solved, and sampler.profile_samples=0 runs no profile; set sampler.profile_samples "
                              ">= 2 (or sampler.refill_rounds=0)")
        if self.refill_below > 0 and self.refill_rounds == 0:
            raise ConfigError(f"sampler.refill_below={self.refill_below} runs the refill's rounds between profiles, "
                              "and sampler.refill_rounds=0 runs none; set sampler.refill_rounds >= 1 (or "
                              "sampler.refill_below=0)")
        if self.window < self.profile_samples:
            raise ConfigError(f"sampler.window={self.window} is smaller than sampler.profile_samples="
                              f"{self.profile_samples}: the estimate would drop profile samples; set "
                              f"sampler.window >= {self.profile_samples}")
