"""The `optimizer` argument of the canned Estimators: a name, an instance or a callable.

    from trainer.estimator.canned import optimizers

    optimizers.get_optimizer_instance('Adagrad', learning_rate=0.05)   # AdagradOptimizer(0.05)
    optimizers.get_optimizer_instance(tf.compat.v1.train.AdamOptimizer(1e-3))  # as given
    optimizers.get_optimizer_instance(lambda: tf.compat.v1.train.FtrlOptimizer(0.1))
    optimizers.for_clones(optimizer)   # wrapped in TowerOptimizer (num_clones)

Names (tf.estimator's): 'Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'. A name
gets the canned Estimator's default learning rate (linear 0.2, DNN 0.05,
baseline 0.3); an instance or a callable's result is used as it is.

Differs on purpose: tf.estimator 2.15's V2 classes turn names into Keras
optimizers; here they are the `tf.compat.v1.train` optimizers (the v1
classes' choice), because the canned models train in graph mode through
`Optimizer.minimize` and `TowerOptimizer`.
"""

import tensorflow as tf

from trainer.estimator import replicate

__all__ = ['get_optimizer_instance', 'for_clones', 'OPTIMIZER_NAMES']

_v1 = tf.compat.v1.train
OPTIMIZER_NAMES = {
    'Adagrad': _v1.AdagradOptimizer,
    'Adam': _v1.AdamOptimizer,
    'Ftrl': _v1.FtrlOptimizer,
    'RMSProp': _v1.RMSPropOptimizer,
    'SGD': _v1.GradientDescentOptimizer,
}


def get_optimizer_instance(opt, learning_rate=None):
  """The `tf.compat.v1.train.Optimizer` that `opt` stands for.

  Args:
    opt: a name from OPTIMIZER_NAMES, an Optimizer, or a callable returning one.
    learning_rate: the learning rate for a name (required then; ignored otherwise).

  Returns:
    A `tf.compat.v1.train.Optimizer`.

  Raises:
    ValueError: an unknown name, a name without learning_rate, or an object
      (or callable result) that is not a v1 Optimizer.
  """
  if isinstance(opt, str):
    if opt not in OPTIMIZER_NAMES:
      raise ValueError('Unsupported optimizer name: {}. Supported names are: {}'.format(
          opt, tuple(sorted(OPTIMIZER_NAMES))))
    if learning_rate is None:
      raise ValueError('learning_rate must be specified when opt is string.')
    return OPTIMIZER_NAMES[opt](learning_rate=learning_rate)
  if callable(opt) and not isinstance(opt, tf.compat.v1.train.Optimizer):
    opt = opt()
  if not isinstance(opt, tf.compat.v1.train.Optimizer):
    raise ValueError('The given object is not an Optimizer instance (optimizer must be a name '
                     'in {}, a tf.compat.v1.train.Optimizer or a callable returning one). '
                     'Given: {}'.format(tuple(sorted(OPTIMIZER_NAMES)), opt))
  return opt


def for_clones(optimizer):
  """`optimizer` wrapped in `TowerOptimizer` (once), so num_clones > 1 can train it."""
  if isinstance(optimizer, replicate.TowerOptimizer):
    return optimizer
  return replicate.TowerOptimizer(optimizer)
