"""The `optimizer` argument of the canned Estimators: a name, an instance or a callable.

    from estimator.canned import optimizers

    optimizers.get_optimizer_instance('Adagrad', learning_rate=0.05)   # AdagradOptimizer(0.05)
    optimizers.get_optimizer_instance(tf.compat.v1.train.AdamOptimizer(1e-3))  # as given
    optimizers.get_optimizer_instance(lambda: tf.compat.v1.train.FtrlOptimizer(0.1))
    optimizers.get_optimizer_instance(
        tf_keras.optimizers.Ftrl(learning_rate=0.1, l1_regularization_strength=0.001))
    optimizers.for_clones(optimizer)   # wrapped in TowerOptimizer (num_clones)

Names (tf.estimator's): 'Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'. A name
gets the canned Estimator's default learning rate (linear 0.2, DNN 0.05,
baseline 0.3); an instance or a callable's result is used as it is.

A Keras optimizer (tf_keras, legacy or not, or Keras 3's `tf.keras`), as
tf.estimator 2.15's docstrings pass it, is read through `get_config()` and
becomes the `tf.compat.v1.train` optimizer of the same algorithm with the
same hyper-parameters, built afresh in each graph the Estimator makes:
Adagrad, Adam, Adadelta, Ftrl, RMSprop, SGD (momentum and nesterov). A
learning-rate schedule is evaluated at the global step. The Keras object
itself is never used, so it keeps no state between `train()` calls. A Keras 3
optimizer (made eagerly) is read when the Estimator is constructed, since
its variables cannot be read inside the Estimator's graphs; a tf_keras one
made in graph mode, whose `get_config()` fails there, is read attribute by
attribute (a learning-rate tensor made in the training graph stays a tensor),
and the variables it made there are initialized without reading the global
step, which a learning-rate schedule reads (the v1 optimizer never uses them).

Differs on purpose: tf.estimator 2.15's V2 classes turn names into Keras
optimizers; here they are the `tf.compat.v1.train` optimizers (the v1
classes' choice), because the canned models train in graph mode through
`Optimizer.minimize` and `TowerOptimizer`. For the same reason Keras
optimizers are translated, not run: Keras-only settings (weight_decay,
clipnorm / clipvalue / global_clipnorm, use_ema, amsgrad, gradient
accumulation) are refused with an error naming the setting, and so are Keras
optimizers without a v1 twin (Adamax, Nadam, AdamW, Lion, ...). Small
numerical differences remain where the v1 algorithm differs: v1 Adagrad has
no epsilon, v1 RMSProp starts its mean square at 1, Keras at 0.
"""

import weakref

import numpy as np
import tensorflow as tf

from estimator import replicate

__all__ = ['get_optimizer_instance', 'check_keras_optimizer', 'for_clones', 'OPTIMIZER_NAMES']

_v1 = tf.compat.v1.train
OPTIMIZER_NAMES = {
    'Adagrad': _v1.AdagradOptimizer,
    'Adam': _v1.AdamOptimizer,
    'Ftrl': _v1.FtrlOptimizer,
    'RMSProp': _v1.RMSPropOptimizer,
    'SGD': _v1.GradientDescentOptimizer,
}


# Keras optimizer class -> (tf.compat.v1.train class, {v1 argument: Keras config key}).
_KERAS_TO_V1 = {
    'Adagrad': (_v1.AdagradOptimizer, {'initial_accumulator_value': 'initial_accumulator_value'}),
    'Adam': (_v1.AdamOptimizer, {'beta1': 'beta_1', 'beta2': 'beta_2', 'epsilon': 'epsilon'}),
    'Adadelta': (_v1.AdadeltaOptimizer, {'rho': 'rho', 'epsilon': 'epsilon'}),
    'Ftrl': (_v1.FtrlOptimizer, {
        'learning_rate_power': 'learning_rate_power',
        'initial_accumulator_value': 'initial_accumulator_value',
        'l1_regularization_strength': 'l1_regularization_strength',
        'l2_regularization_strength': 'l2_regularization_strength',
        'l2_shrinkage_regularization_strength': 'l2_shrinkage_regularization_strength',
        'beta': 'beta'}),
    'RMSprop': (_v1.RMSPropOptimizer, {'decay': 'rho', 'momentum': 'momentum',
                                       'epsilon': 'epsilon', 'centered': 'centered'}),
    'SGD': (_v1.MomentumOptimizer, {'momentum': 'momentum', 'use_nesterov': 'nesterov'}),
}
# Keras settings that graph-mode v1 optimizers have no equivalent for: (key, harmless values).
_KERAS_UNSUPPORTED = (('weight_decay', (None, 0, 0.0)), ('clipnorm', (None,)),
                      ('clipvalue', (None,)), ('global_clipnorm', (None,)),
                      ('use_ema', (False, None)), ('amsgrad', (False, None)),
                      ('gradient_accumulation_steps', (None, 1)),
                      ('loss_scale_factor', (None,)))


def _keras_class_name(opt):
  """The Keras optimizer class `opt` is (or derives from), or None for a non-Keras object."""
  for cls in type(opt).__mro__:
    if cls.__module__.split('.')[0] in ('keras', 'tf_keras') and cls.__name__ in _KERAS_TO_V1:
      return cls.__name__
  if type(opt).__module__.split('.')[0] in ('keras', 'tf_keras') and hasattr(opt, 'get_config'):
    raise ValueError(
        'The Keras optimizer {} has no tf.compat.v1.train counterpart for the canned '
        'Estimators (they train in graph mode). Pass one of the Keras optimizers {}, a name '
        'in {}, or a tf.compat.v1.train.Optimizer (or a callable returning one).'.format(
            type(opt).__name__, sorted(_KERAS_TO_V1), tuple(sorted(OPTIMIZER_NAMES))))
  return None


_CONFIGS = weakref.WeakKeyDictionary()  # Keras optimizer -> its config, read eagerly.


def _plain(value):
  """A Python number for an eager tensor or a numpy scalar; anything else as it is."""
  if isinstance(value, tf.Tensor) and tf.executing_eagerly():
    value = value.numpy()
  if isinstance(value, np.generic):
    value = value.item()
  return value


def _keras_config(opt, name):
  """The optimizer's `get_config()`, or the same keys read from its attributes.

  A Keras optimizer made inside a graph (a callable's, with a learning-rate
  tensor as tf.estimator's docstrings show) cannot serialize itself there, so
  its hyper-parameters are read off the object; a learning-rate tensor stays a
  tensor of this graph.
  """
  try:
    cached = _CONFIGS.get(opt)
  except TypeError:  # Not weak-referenceable: nothing cached.
    cached = None
  if cached is not None:
    return dict(cached)
  try:
    config = {k: _plain(v) for k, v in opt.get_config().items()}
  except (NotImplementedError, ValueError, TypeError, tf.errors.OpError):
    config = None
  if config is not None:
    try:
      # An eagerly made optimizer (Keras 3) can read its variables only eagerly: the
      # Estimator's constructor checks it there, and its graphs reuse what was read.
      _CONFIGS[opt] = config
    except TypeError:
      pass
    return dict(config)
  hyper = getattr(opt, '_hyper', {})  # Legacy optimizers keep their settings here.
  keys = (list(_KERAS_TO_V1[name][1].values()) + [k for k, _ in _KERAS_UNSUPPORTED] +
          ['decay'])
  config = {}
  for key in keys:
    if key in hyper:
      config[key] = hyper[key]
    elif isinstance(getattr(opt, key, None), (bool, int, float, type(None))):
      config[key] = getattr(opt, key, None)
  learning_rate = hyper.get('learning_rate', getattr(opt, '_learning_rate', None))
  if isinstance(getattr(learning_rate, 'initial_value', None), tf.Tensor):
    learning_rate = learning_rate.initial_value  # A variable made from the value given.
  if isinstance(learning_rate, tf.Tensor):
    constant = tf.get_static_value(learning_rate)
    if constant is not None:
      learning_rate = float(constant)
    elif learning_rate.graph is not tf.compat.v1.get_default_graph():
      raise ValueError(
          'The {} optimizer\'s learning rate is a tensor of another graph ({}). Pass the '
          'optimizer as a callable (optimizer=lambda: ...), so that it is made in the graph '
          'the Estimator builds.'.format(name, learning_rate.name))
  config['learning_rate'] = learning_rate
  return config


def check_keras_optimizer(opt):
  """(class name, config) of a supported Keras optimizer; None for other objects.

  Raises:
    ValueError: a Keras optimizer without a v1 counterpart, or one using a
      setting (weight_decay, clipnorm, use_ema, amsgrad ...) that v1 lacks.
  """
  name = _keras_class_name(opt)
  if name is None:
    return None
  config = _keras_config(opt, name)
  for key, harmless in _KERAS_UNSUPPORTED:
    if config.get(key) not in harmless:
      raise ValueError(
          'The Keras optimizer {} sets {}={!r}, which the canned Estimators cannot apply '
          '(they train with the tf.compat.v1.train optimizers). Leave {} unset, or pass a '
          'callable returning a tf.compat.v1.train.Optimizer that does what you need.'.format(
              name, key, config.get(key), key))
  return name, config


def _keras_learning_rate(config):
  """The Keras learning rate: a float, or a tensor of the global step (schedule, decay)."""
  learning_rate = config['learning_rate']
  if isinstance(learning_rate, dict):
    import tf_keras  # Only needed for a schedule; tf_keras reads Keras 3 configs too.
    learning_rate = tf_keras.optimizers.schedules.deserialize(
        {'class_name': learning_rate['class_name'], 'config': learning_rate['config']})
  if callable(learning_rate) and hasattr(learning_rate, 'get_config'):  # A schedule object.
    return learning_rate(tf.compat.v1.train.get_or_create_global_step())
  if isinstance(learning_rate, (tf.Tensor, tf.Variable)):
    return learning_rate
  learning_rate = float(learning_rate)
  decay = config.get('decay')
  if decay:  # Legacy Keras optimizers' time-based decay.
    step = tf.cast(tf.compat.v1.train.get_or_create_global_step(), tf.float32)
    return learning_rate / (1.0 + tf.cast(decay, tf.float32) * step)
  return learning_rate


def _v1_from_keras(name, config):
  """The tf.compat.v1.train optimizer with the Keras optimizer's hyper-parameters."""
  v1_class, keys = _KERAS_TO_V1[name]
  kwargs = {v1_key: config[keras_key] for v1_key, keras_key in keys.items()
            if keras_key in config}
  if name == 'SGD' and not kwargs.get('momentum'):
    return _v1.GradientDescentOptimizer(_keras_learning_rate(config))
  return v1_class(learning_rate=_keras_learning_rate(config), **kwargs)


def _initialize_keras_variables_from_nothing_else(opt):
  """Gives a graph-made Keras optimizer's variables initializers that read no variable.

  A tf_keras optimizer made in graph mode (a callable's, or a user model_fn's)
  creates `iteration` and `learning_rate` variables at once. With a learning
  rate that is a schedule of the global step, the second's initializer reads
  `global_step`, and the one init op that initializes both ran them in either
  order: whichever ran first decided whether training started
  (FailedPreconditionError "Could not find variable global_step"). No control
  dependency can order that read (it is an input of the initializer, and the
  v1 optimizer reads the same tensor at every step), so such a variable is
  initialized to zeros instead: the v1 optimizer that replaces the Keras one
  never reads it. The variables stay in the graph's collections, so every
  graph that makes the optimizer (train, evaluate, predict) saves and
  restores the same ones.
  """
  graph = tf.compat.v1.get_default_graph()
  for variable in (getattr(opt, '_iterations', None), getattr(opt, '_learning_rate', None)):
    if not (isinstance(variable, tf.Variable) and getattr(variable, 'graph', None) is graph):
      continue
    initial_value = getattr(variable, 'initial_value', None)
    if not isinstance(initial_value, tf.Tensor) or tf.get_static_value(initial_value) is not None:
      continue
    with tf.compat.v1.name_scope(None):
      zeros = tf.zeros(variable.shape, variable.dtype.base_dtype)
      # TF has no public way to replace a variable's initializer; the graph
      # is not finalized while the model is built.
      variable._initializer_op = variable.assign(  # pylint: disable=protected-access
          zeros, read_value=False, name=variable.op.name + '/InitializeWithZeros')


def get_optimizer_instance(opt, learning_rate=None):
  """The `tf.compat.v1.train.Optimizer` that `opt` stands for.

  Args:
    opt: a name from OPTIMIZER_NAMES, an Optimizer, a Keras optimizer
      (tf_keras or Keras 3: Adagrad, Adam, Adadelta, Ftrl, RMSprop, SGD), or a
      callable returning one of these.
    learning_rate: the learning rate for a name (required then; ignored otherwise).

  Returns:
    A `tf.compat.v1.train.Optimizer`; a Keras optimizer becomes the v1 class
    with its hyper-parameters (learning rate or schedule, momentum, betas,
    FTRL's regularization strengths ...).

  Raises:
    ValueError: an unknown name, a name without learning_rate, or an object
      (or callable result) that is not an optimizer this module can use.
  """
  if isinstance(opt, str):
    if opt not in OPTIMIZER_NAMES:
      raise ValueError('Unsupported optimizer name: {}. Supported names are: {}'.format(
          opt, tuple(sorted(OPTIMIZER_NAMES))))
    if learning_rate is None:
      raise ValueError('learning_rate must be specified when opt is string.')
    return OPTIMIZER_NAMES[opt](learning_rate=learning_rate)
  if (callable(opt) and not isinstance(opt, tf.compat.v1.train.Optimizer) and
      check_keras_optimizer(opt) is None):
    opt = opt()
  keras = check_keras_optimizer(opt)
  if keras is not None:
    v1_optimizer = _v1_from_keras(*keras)  # Reads the Keras learning rate's initial value.
    _initialize_keras_variables_from_nothing_else(opt)
    return v1_optimizer
  if not isinstance(opt, tf.compat.v1.train.Optimizer):
    raise ValueError('The given object is not an Optimizer instance (optimizer must be a name '
                     'in {}, a tf.compat.v1.train.Optimizer, a Keras optimizer or a callable '
                     'returning one). Given: {}'.format(tuple(sorted(OPTIMIZER_NAMES)), opt))
  return opt


def for_clones(optimizer):
  """`optimizer` wrapped in `TowerOptimizer` (once), so num_clones > 1 can train it."""
  if isinstance(optimizer, replicate.TowerOptimizer):
    return optimizer
  return replicate.TowerOptimizer(optimizer)
