"""Old import path of `core.numerics` (the training step's numerics guards).

Both training paths share those guards, so they live in `core/`; this name
keeps `from trainer import numerics` working and hands out the very same
objects:

    from trainer import numerics
    assert numerics.check_gradient_norm is core.numerics.check_gradient_norm
"""

from core.numerics import GRADIENT_NORM_MESSAGE
from core.numerics import check_gradient_norm
from core.numerics import gate_gradients
from core.numerics import inject_nan_loss
from core.numerics import mixed_precision_check

__all__ = ['GRADIENT_NORM_MESSAGE', 'check_gradient_norm', 'gate_gradients',
           'inject_nan_loss', 'mixed_precision_check']
