"""Parametric Harbor task families with train / held-out splits (:mod:`.generate`), their instances written as
ordinary task folders (:mod:`.spec`), one generator per family (:mod:`.kinds`)."""
from trajkit.envs.harbor.families.generate import FAMILIES, HELDOUT_FAMILIES, generate, split_of

__all__ = ["FAMILIES", "HELDOUT_FAMILIES", "generate", "split_of"]
