"""Old import path of `utils.learning_schedules` (the learning-rate schedules).

The schedules are runtime maths over the global step, not config builders, so
they live in `utils/` as in the Object Detection API; `builders/optimizer_builder.py`
calls them from an `Optimizer` config. This name keeps `from builders import
learning_schedules` working and hands out the very same functions:

    from builders import learning_schedules
    learning_rate = learning_schedules.manual_stepping(global_step, [1000], [0.1, 0.01])
"""

from utils.learning_schedules import cosine_decay_with_warmup
from utils.learning_schedules import exponential_decay_with_burnin
from utils.learning_schedules import exponential_decay_with_warmup
from utils.learning_schedules import manual_stepping

__all__ = ['cosine_decay_with_warmup', 'exponential_decay_with_burnin',
           'exponential_decay_with_warmup', 'manual_stepping']
