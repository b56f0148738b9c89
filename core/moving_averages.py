"""Moving averages of the trained weights: kept during training, read back after.

`MovingAverageOptimizer` (what `use_moving_average: true` in an `Optimizer`
config builds): after every `apply_gradients` it also updates an
exponential moving average (`tf.compat.v1.train.ExponentialMovingAverage`,
decay `moving_average_decay`) of each variable it trained, stored in slot
variables named `<var>/ExponentialMovingAverage`, as TF-Slim and the OD API
named them. For evaluation and export, `optimizer.swapping_saver()` is a Saver
whose entry for each variable name holds the averaged value (and vice versa):
restoring a checkpoint through it loads the averages into the model variables;
saving through it writes the averages under the model names. A graph that has
no averages at all (a fresh eval graph) restores them with
`moving_average_restore_map()`.

    # Training: builders.optimizer_builder.build wraps the optimizer this way.
    optimizer = moving_averages.MovingAverageOptimizer(
        tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), average_decay=0.9999)

    # Evaluation or export of a checkpoint trained that way: one builder for
    # every reader (evaluator, exporter, the Estimator's eval scaffold).
    saver = moving_averages.restore_saver(
        moving_averages.uses_moving_averages(train_config, eval_config),
        checkpoint_path=checkpoint)
    saver.restore(sess, checkpoint)
"""

from core import logs as logging
import tensorflow as tf

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


def uses_moving_averages(train_config, eval_config):
  """Whether evaluation and export should read the weights' moving averages.

  A model trained with averages is evaluated and exported with them, and an
  eval config may ask for them on its own.

  Args:
    train_config: a `TrainConfig` (its `optimizer.use_moving_average`).
    eval_config: an `EvalConfig` (its `use_moving_averages`).

  Returns:
    True when either flag is set.
  """
  return bool(train_config.optimizer.use_moving_average or eval_config.use_moving_averages)


def restore_saver(use_moving_averages, checkpoint_path=None, variables=None,
                  model_description='model'):
  """The Saver that loads a fresh graph's variables: raw weights or their averages.

  What the evaluator, the exporter and the Estimator's evaluation all build
  to read a training checkpoint. With `use_moving_averages` each trainable
  variable is read from its `<name>/ExponentialMovingAverage` entry (see
  `moving_average_restore_map`); otherwise every variable from its own name.

  When `checkpoint_path` is known, the checkpoint is read now: a variable it
  lacks is an error here, naming the variables, instead of a NotFoundError
  at restore time; and the number of averaged variables is logged (a warning
  when averages were asked for but the checkpoint has none, so the raw
  weights are used). Without it (an Estimator's graph is built before the
  checkpoint is chosen) the map is built blind and restoring checks it.

  Args:
    use_moving_averages: read the moving averages of trainable variables.
    checkpoint_path: optional resolved checkpoint prefix.
    variables: variables to restore (default: all global variables).
    model_description: how the error names the graph, e.g. 'eval model'.

  Returns:
    A `tf.compat.v1.train.Saver`.

  Raises:
    ValueError: when `checkpoint_path` lacks variables the graph needs.
  """
  if variables is None:
    variables = tf.compat.v1.global_variables()
  if use_moving_averages:
    var_map = moving_average_restore_map(variables, checkpoint_path)
  else:
    var_map = variables_helper.variables_to_checkpoint_names(variables)
  if checkpoint_path is not None:
    reader = tf.compat.v1.train.NewCheckpointReader(checkpoint_path)
    missing = sorted(name for name in var_map if not reader.has_tensor(name))
    if missing:
      raise ValueError('checkpoint %s lacks %d variables the %s needs, e.g. %s; '
                       'was it trained with this pipeline config?' %
                       (checkpoint_path, len(missing), model_description,
                        ', '.join(missing[:5])))
    if use_moving_averages:
      _log_averaged(var_map, checkpoint_path)
  return tf.compat.v1.train.Saver(var_map)


def _log_averaged(var_map, checkpoint_path):
  """Says how many variables are read from their averages (warns on none)."""
  suffix = '/' + _EMA_NAME
  num_averaged = sum(1 for name in var_map if name.endswith(suffix))
  if num_averaged:
    logging.info('Restoring the moving averages of %d variables from %s', num_averaged,
                 checkpoint_path)
  else:
    logging.warning('moving averages were asked for but %s has none; restoring the raw '
                    'weights', checkpoint_path)
