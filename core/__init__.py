"""Core of slimtrain: model interfaces, input queues, augmentation, fields."""

from core import compat  # noqa: F401  (must run before tf_slim is used)
