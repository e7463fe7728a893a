"""Moved to :mod:`trajkit.envs.calculator` (environments live in ``trajkit.envs``, below the trainer). This name stays an alias
of that module for code that imports it from here: same objects, same module."""
import sys

from trajkit.envs import calculator

sys.modules[__name__] = calculator
