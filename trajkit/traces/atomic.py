"""Moved to :mod:`trajkit.atomic` (the ground floor: every package writes files through it). This name stays an alias
of that module for code that imports it from here: same objects, same module."""
import sys

from trajkit import atomic

sys.modules[__name__] = atomic
