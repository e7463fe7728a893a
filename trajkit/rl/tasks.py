"""Moved to :mod:`trajkit.envs.single_turn` (environments live in ``trajkit.envs``, below the trainer). This name stays an alias
of that module for code that imports it from here: same objects, same module."""
import sys

from trajkit.envs import single_turn

sys.modules[__name__] = single_turn
