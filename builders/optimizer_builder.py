"""Builds a tf.compat.v1 optimizer and its learning rate from an `Optimizer` config.

    optimizer {
      momentum_optimizer {
        learning_rate {
          cosine_decay_learning_rate {
            learning_rate_base: 0.04  total_steps: 25000
            warmup_learning_rate: 0.013  warmup_steps: 2000
          }
        }
        momentum_optimizer_value: 0.9
      }
      use_moving_average: true
      moving_average_decay: 0.9999
      learning_rate_scaling: LINEAR
      reference_batch_size: 64
    }

    optimizer, summary_vars = optimizer_builder.build(
        train_config.optimizer, global_step=global_step,
        global_batch_size=train_config.batch_size * worker_replicas)
    train_op = optimizer.minimize(total_loss, global_step=global_step)
    for var in summary_vars:
      tf.compat.v1.summary.scalar('Learning_Rate', var)

Optimizers: `rms_prop_optimizer`, `momentum_optimizer`, `adam_optimizer` and
`sgd_optimizer` map to the `tf.compat.v1.train` classes of the same names.
Learning rates: `constant_learning_rate`, `exponential_decay_learning_rate`
(with burn-in), `manual_step_learning_rate` (with optional warmup) and
`cosine_decay_learning_rate` (with warmup and hold), see
`builders/learning_schedules.py`.

Linear learning-rate scaling
----------------------------
Goyal et al., "Accurate, Large Minibatch SGD" (2017): when the minibatch grows
k-fold, multiply the learning rate by k. A config states its rates for
`reference_batch_size` examples per step; with `learning_rate_scaling: LINEAR`
every rate of the schedule (base, burn-in/warmup start, minimum and each manual
step) is multiplied by

    k = global_batch_size / reference_batch_size

where `global_batch_size` is the number of examples that contribute to one
update of the variables: the per-worker batch (split over its clones) times
the number of worker replicas whose gradients are aggregated. Step counts
(decay steps, warmup, boundaries) are not changed. So a config tuned on one
GPU with batch 64 and `reference_batch_size: 64` keeps working when trained
on 8 workers with batch 64 each: its rates are multiplied by 8. Large k
usually wants a warmup (`warmup_steps` of the cosine schedule, `warmup` of the
manual schedule) so the scaled rate is reached gradually. `NO_SCALING` (the
default) uses the rates as written and ignores `global_batch_size`.

Moving averages
---------------
With `use_moving_average: true` the returned optimizer is a
`MovingAverageOptimizer`: after every `apply_gradients` it also updates an
exponential moving average (`tf.compat.v1.train.ExponentialMovingAverage`,
decay `moving_average_decay`) of each variable it trained, stored in slot
variables named `<var>/ExponentialMovingAverage`, as TF-Slim and the OD API
named them. For evaluation and export, `optimizer.swapping_saver()` is a Saver
whose entry for each variable name holds the averaged value (and vice versa):
restoring a checkpoint through it loads the averages into the model variables;
saving through it writes the averages under the model names. A graph that has
no averages at all (a fresh eval graph) restores them with
`moving_average_restore_map()`.
"""

from absl import logging
import tensorflow as tf

from builders import learning_schedules
from core import variables_helper

_EMA_NAME = 'ExponentialMovingAverage'


class MovingAverageOptimizer(tf.compat.v1.train.Optimizer):
  """Wraps an optimizer so that each update also updates moving averages.

  A replacement for `tf.contrib.opt.MovingAverageOptimizer`:

      opt = MovingAverageOptimizer(
          tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), average_decay=0.999)
      train_op = opt.minimize(loss, global_step=global_step)
      saver = opt.swapping_saver()   # evaluation / export reads the averages

  The averages are updated after (control-dependent on) the wrapped
  optimizer's update, so they average the new values.
  """

  def __init__(self, optimizer, average_decay=0.9999, num_updates=None,
               sequential_update=True, name='MovingAverageOptimizer'):
    """Creates the wrapper.

    Args:
      optimizer: the `tf.compat.v1.train.Optimizer` that computes updates.
      average_decay: decay of the exponential moving average.
      num_updates: optional step tensor; when given the decay ramps up as
        `min(decay, (1 + num_updates) / (10 + num_updates))`.
      sequential_update: update the averages only after the variables.
      name: name of the wrapper.
    """
    super().__init__(use_locking=False, name=name)
    self._optimizer = optimizer
    self._ema = tf.compat.v1.train.ExponentialMovingAverage(
        average_decay, num_updates=num_updates, name=_EMA_NAME)
    self._sequential_update = sequential_update
    self._averaged_variables = []

  @property
  def ema(self):
    """The `tf.compat.v1.train.ExponentialMovingAverage` used."""
    return self._ema

  @property
  def optimizer(self):
    """The wrapped optimizer."""
    return self._optimizer

  def averaged_variables(self):
    """Returns the variables whose moving average this optimizer keeps."""
    return list(self._averaged_variables)

  def compute_gradients(self, *args, **kwargs):
    """Same as the wrapped optimizer's `compute_gradients`."""
    return self._optimizer.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """Applies gradients with the wrapped optimizer, then updates averages.

    Args:
      grads_and_vars: list of (gradient, variable) pairs.
      global_step: optional variable incremented by the wrapped optimizer.
      name: optional name of the returned op.

    Returns:
      An op that applies the update and the moving-average update.
    """
    grads_and_vars = list(grads_and_vars)
    train_op = self._optimizer.apply_gradients(
        grads_and_vars, global_step=global_step, name=name)
    var_list = [v for g, v in grads_and_vars if g is not None]
    for var in var_list:
      if all(var is not known for known in self._averaged_variables):
        self._averaged_variables.append(var)
    if self._sequential_update:
      with tf.control_dependencies([train_op]):
        ma_op = self._ema.apply(var_list)
    else:
      ma_op = self._ema.apply(var_list)
    return tf.group(train_op, ma_op, name='train_with_avg')

  def get_slot(self, var, name):
    """Slot `name` of `var` in the wrapped optimizer."""
    return self._optimizer.get_slot(var, name)

  def get_slot_names(self):
    """Slot names of the wrapped optimizer."""
    return self._optimizer.get_slot_names()

  def variables(self):
    """The wrapped optimizer's variables plus the moving averages."""
    averages = [self._ema.average(v) for v in self._averaged_variables]
    return self._optimizer.variables() + [a for a in averages if a is not None]

  def swapping_saver(self, var_list=None, name='swapping_saver', **kwargs):
    """A Saver that swaps each averaged variable with its moving average.

    The checkpoint entry `<var>` is read into / written from the average and
    `<var>/ExponentialMovingAverage` from / to the variable; other variables
    are saved as usual. Restoring a training checkpoint with it therefore puts
    the averaged values into the model variables (evaluation, export), and
    saving with it writes a checkpoint whose model names hold the averages.

    Args:
      var_list: variables to save (default: all global variables).
      name: name of the Saver.
      **kwargs: passed to `tf.compat.v1.train.Saver`.

    Returns:
      A `tf.compat.v1.train.Saver`.

    Raises:
      RuntimeError: if called before `apply_gradients` / `minimize`.
    """
    if not self._averaged_variables:
      raise RuntimeError('Must call apply_gradients or minimize before '
                         'creating the swapping_saver')
    if var_list is None:
      var_list = tf.compat.v1.global_variables()
    swap = {}
    for var in self._averaged_variables:
      average = self._ema.average(var)
      swap[var.ref()] = average
      swap[average.ref()] = var
    names_to_saveables = {}
    checkpoint_names = variables_helper.variables_to_checkpoint_names(var_list)
    for ckpt_name, value in checkpoint_names.items():
      if isinstance(value, list):
        names_to_saveables[ckpt_name] = [swap.get(v.ref(), v) for v in value]
      else:
        names_to_saveables[ckpt_name] = swap.get(value.ref(), value)
    return tf.compat.v1.train.Saver(names_to_saveables, name=name, **kwargs)


def moving_average_restore_map(variables=None, checkpoint_path=None):
  """Maps checkpoint names to variables so that averages load into them.

  For a graph without averages (evaluation, export) whose checkpoint was
  trained with `use_moving_average`: `tf.compat.v1.train.Saver(
  moving_average_restore_map(checkpoint_path=ckpt)).restore(sess, ckpt)`
  loads `<var>/ExponentialMovingAverage` into each trainable variable and
  other variables (batch-norm statistics, global step) from their own names.

  Args:
    variables: variables to restore (default: all global variables). Only
      trainable ones are mapped to their average.
    checkpoint_path: optional checkpoint prefix or directory (see
      `core.variables_helper.resolve_checkpoint_path`); when given, a trainable
      variable whose average is not in it maps to its own name instead.

  Returns:
    A dict {checkpoint name: variable or list of partitions}.
  """
  if variables is None:
    variables = tf.compat.v1.global_variables()
  trainable = {v.ref() for v in tf.compat.v1.trainable_variables()}
  names_in_checkpoint = None
  if checkpoint_path is not None:
    reader = tf.compat.v1.train.NewCheckpointReader(
        variables_helper.resolve_checkpoint_path(checkpoint_path))
    names_in_checkpoint = set(reader.get_variable_to_shape_map())
  restore_map = {}
  checkpoint_names = variables_helper.variables_to_checkpoint_names(variables)
  for name, value in checkpoint_names.items():
    pieces = value if isinstance(value, list) else [value]
    average_name = '%s/%s' % (name, _EMA_NAME)
    use_average = all(v.ref() in trainable for v in pieces) and (
        names_in_checkpoint is None or average_name in names_in_checkpoint)
    restore_map[average_name if use_average else name] = value
  return restore_map


def _learning_rate_scale(optimizer_config, global_batch_size):
  """The linear-scaling factor k of the module docstring (1.0 if off)."""
  scaling = optimizer_config.learning_rate_scaling
  if scaling == optimizer_config.NO_SCALING:
    return 1.0
  if scaling != optimizer_config.LINEAR:
    raise ValueError('Optimizer.learning_rate_scaling %s not supported.' %
                     scaling)
  if global_batch_size is None:
    raise ValueError(
        'Optimizer.learning_rate_scaling is LINEAR but no global_batch_size '
        'was given: pass the number of examples per update over all clones '
        'and worker replicas to optimizer_builder.build().')
  if global_batch_size <= 0:
    raise ValueError('global_batch_size must be positive, got %r.' %
                     (global_batch_size,))
  if optimizer_config.reference_batch_size <= 0:
    raise ValueError('Optimizer.reference_batch_size must be positive, got '
                     '%d.' % optimizer_config.reference_batch_size)
  scale = float(global_batch_size) / optimizer_config.reference_batch_size
  logging.info('Linear learning-rate scaling: global batch %d / reference '
               'batch %d = x%g.', global_batch_size,
               optimizer_config.reference_batch_size, scale)
  return scale


def _create_learning_rate(learning_rate_config, global_step=None, scale=1.0):
  """Builds the learning-rate tensor of a `LearningRate` config.

  Args:
    learning_rate_config: a `optimizer_pb2.LearningRate`.
    global_step: the step tensor (default: get_or_create_global_step()).
    scale: factor applied to every rate of the schedule.

  Returns:
    A scalar float32 tensor named `learning_rate`.

  Raises:
    ValueError: for an unset or unknown schedule, or an empty manual one.
  """
  if global_step is None:
    global_step = tf.compat.v1.train.get_or_create_global_step()
  learning_rate_type = learning_rate_config.WhichOneof('learning_rate')

  if learning_rate_type == 'constant_learning_rate':
    config = learning_rate_config.constant_learning_rate
    return tf.constant(config.learning_rate * scale, dtype=tf.float32,
                       name='learning_rate')

  if learning_rate_type == 'exponential_decay_learning_rate':
    config = learning_rate_config.exponential_decay_learning_rate
    return learning_schedules.exponential_decay_with_burnin(
        global_step,
        config.initial_learning_rate * scale,
        config.decay_steps,
        config.decay_factor,
        burnin_learning_rate=config.burnin_learning_rate * scale,
        burnin_steps=config.burnin_steps,
        min_learning_rate=config.min_learning_rate * scale,
        staircase=config.staircase)

  if learning_rate_type == 'manual_step_learning_rate':
    config = learning_rate_config.manual_step_learning_rate
    if not config.schedule:
      raise ValueError('Empty learning rate schedule.')
    boundaries = [int(x.step) for x in config.schedule]
    rates = [float(config.initial_learning_rate * scale)]
    rates += [float(x.learning_rate * scale) for x in config.schedule]
    return learning_schedules.manual_stepping(
        global_step, boundaries, rates, config.warmup)

  if learning_rate_type == 'cosine_decay_learning_rate':
    config = learning_rate_config.cosine_decay_learning_rate
    return learning_schedules.cosine_decay_with_warmup(
        global_step,
        config.learning_rate_base * scale,
        config.total_steps,
        config.warmup_learning_rate * scale,
        config.warmup_steps,
        config.hold_base_rate_steps)

  raise ValueError('Learning_rate %s not supported.' % learning_rate_type)


def build(optimizer_config, global_step=None, global_batch_size=None):
  """Builds an optimizer and its learning rate from an `Optimizer` config.

  Args:
    optimizer_config: a `optimizer_pb2.Optimizer`.
    global_step: the step tensor the schedules read (default:
      `tf.compat.v1.train.get_or_create_global_step()`).
    global_batch_size: examples per variable update over all clones and
      worker replicas; required when `learning_rate_scaling` is LINEAR,
      ignored otherwise.

  Returns:
    (optimizer, summary_vars): a `tf.compat.v1.train.Optimizer` (a
    `MovingAverageOptimizer` when `use_moving_average`) and the list of
    learning-rate tensors to summarize.

  Raises:
    ValueError: for an unset optimizer or learning rate (`'Optimizer None not
      supported.'`, `'Learning_rate None not supported.'`), an empty manual
      schedule, or LINEAR scaling without `global_batch_size`.
  """
  optimizer_type = optimizer_config.WhichOneof('optimizer')
  if optimizer_type is None:
    raise ValueError('Optimizer %s not supported.' % optimizer_type)
  scale = _learning_rate_scale(optimizer_config, global_batch_size)
  config = getattr(optimizer_config, optimizer_type)
  learning_rate = _create_learning_rate(config.learning_rate, global_step,
                                        scale)
  summary_vars = [learning_rate]

  if optimizer_type == 'rms_prop_optimizer':
    optimizer = tf.compat.v1.train.RMSPropOptimizer(
        learning_rate,
        decay=config.decay,
        momentum=config.momentum_optimizer_value,
        epsilon=config.epsilon)
  elif optimizer_type == 'momentum_optimizer':
    optimizer = tf.compat.v1.train.MomentumOptimizer(
        learning_rate, momentum=config.momentum_optimizer_value)
  elif optimizer_type == 'adam_optimizer':
    optimizer = tf.compat.v1.train.AdamOptimizer(
        learning_rate, beta1=config.beta1, beta2=config.beta2,
        epsilon=config.epsilon)
  elif optimizer_type == 'sgd_optimizer':
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
  else:
    raise ValueError('Optimizer %s not supported.' % optimizer_type)

  if optimizer_config.use_moving_average:
    optimizer = MovingAverageOptimizer(
        optimizer, average_decay=optimizer_config.moving_average_decay)
  return optimizer, summary_vars
