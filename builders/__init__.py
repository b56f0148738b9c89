"""builders package of slimtrain."""

from core import compat  # noqa: F401  (must run before tf_slim is used)
