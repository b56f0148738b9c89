"""Early stopping for `Estimator.train` / `train_and_evaluate`, from eval event files.

The hooks made here are training hooks. Every `run_every_secs` seconds (or
`run_every_steps` steps) the chief reads the evaluation metrics that
`Estimator.evaluate` wrote to `eval_dir` and asks a predicate whether to stop:

    hook = tfe.experimental.stop_if_no_decrease_hook(
        estimator, 'loss', max_steps_without_decrease=1000, min_steps=500)
    tfe.train_and_evaluate(estimator, tfe.TrainSpec(train_input_fn, max_steps=100000,
                                                    hooks=[hook]),
                           tfe.EvalSpec(eval_input_fn, throttle_secs=0))

`max_steps_without_decrease` counts *global steps between evaluation
records*, not evaluations and not an evaluation cadence: with evaluations at
steps 100, 200, ..., 1000 the hook above stops at step 1100 if the best loss
was seen at step 100 (1100 - 100 >= 1000). Evaluations before `min_steps`
are ignored.

When the chief decides to stop it sets the boolean variable
`signal_early_stopping/STOP` (a non-trainable global variable, so it lives on
the parameter servers and is checkpointed) and stops after one more step (so
that the last checkpoint is saved with STOP set); the other workers poll
that variable at every step and stop too. In a `train_and_evaluate` cluster
the evaluator also reads it from the final checkpoint and exits (upstream
left the evaluator running).

Differences from tf.estimator, on purpose: there is no `train_distribute`
path (tf.estimator's test for MultiWorkerMirroredStrategy was always true);
the STOP variable is pinned to the first ps task when there is one, so all
workers poll the same variable whatever the estimator's device function.
"""

import collections
import contextlib
import operator

from core import logs as logging
import tensorflow as tf

from core import paths
from estimator import estimator as estimator_lib

_EVENT_FILE_GLOB_PATTERN = 'events.out.tfevents.*'
STOP_VARIABLE_SCOPE = 'signal_early_stopping'
STOP_VARIABLE_NAME = STOP_VARIABLE_SCOPE + '/STOP'


def _events(pattern):
  """Yields the events of every file matching `pattern` (a corrupt tail is skipped)."""
  for event_file in sorted(tf.io.gfile.glob(pattern)):
    try:
      for event in tf.compat.v1.train.summary_iterator(event_file):
        yield event
    except tf.errors.DataLossError:
      # A file still being written (or truncated by a crash) ends early.
      logging.debug('Stopped reading %s at a truncated record', event_file)


def read_metrics_from_event_files(pattern):
  """The scalar metrics of every event file matching `pattern`, by step.

  Args:
    pattern: file glob, e.g. 'model_dir/eval/*.tfevents.*'.

  Returns:
    OrderedDict {global step: {tag: float}} sorted by step; the values of
    all events of one step are merged.
  """
  metrics_by_step = collections.defaultdict(dict)
  for event in _events(pattern):
    if not event.HasField('summary'):
      continue
    metrics = {value.tag: value.simple_value for value in event.summary.value
               if value.HasField('simple_value')}
    if metrics:
      metrics_by_step[event.step].update(metrics)
  return collections.OrderedDict(sorted(metrics_by_step.items()))


def read_eval_metrics(eval_dir):
  """The evaluation metrics in `eval_dir`: OrderedDict {step: {name: value}}."""
  return read_metrics_from_event_files(paths.join(eval_dir, _EVENT_FILE_GLOB_PATTERN))


def _get_or_create_stop_var(device=None):
  """The global bool `signal_early_stopping/STOP` of the default graph."""
  # device(None) would clear the estimator's device function, so only pin when asked.
  placement = tf.compat.v1.device(device) if device else contextlib.nullcontext()
  with placement, tf.compat.v1.variable_scope(
      STOP_VARIABLE_SCOPE, values=[], reuse=tf.compat.v1.AUTO_REUSE):
    return tf.compat.v1.get_variable(
        name='STOP', shape=[], dtype=tf.bool,
        initializer=tf.compat.v1.initializers.constant(False),
        collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES], trainable=False)


def _stop_var_device(estimator):
  """Where the STOP variable must live so every worker sees the same one."""
  if getattr(estimator.config, 'num_ps_replicas', 0):
    return '/job:ps/task:0/device:CPU:0'
  return None


class _StopOnPredicateHook(tf.compat.v1.train.SessionRunHook):
  """Chief hook: on a timer, asks `should_stop_fn`; sets STOP and stops on True."""

  def __init__(self, should_stop_fn, run_every_secs=60, run_every_steps=None,
               stop_var_device=None):
    if not callable(should_stop_fn):
      raise TypeError('`should_stop_fn` must be callable.')
    self._should_stop_fn = should_stop_fn
    self._timer = tf.compat.v1.train.SecondOrStepTimer(
        every_secs=run_every_secs, every_steps=run_every_steps)
    self._stop_var_device = stop_var_device
    self._global_step_tensor = None
    self._stop_op = None
    self._reset_op = None
    self._stop_set = False

  def begin(self):
    self._global_step_tensor = tf.compat.v1.train.get_global_step()
    if self._global_step_tensor is None:
      raise RuntimeError('Global step should be created to use early stopping hooks.')
    stop_var = _get_or_create_stop_var(self._stop_var_device)
    self._stop_op = tf.compat.v1.assign(stop_var, True)
    self._reset_op = tf.compat.v1.assign(stop_var, False)

  def after_create_session(self, session, coord):
    del coord
    # A checkpoint written after an earlier early stop restores STOP=True; the
    # chief of this run decides anew, so other workers must not stop on it.
    session.run(self._reset_op)

  def before_run(self, run_context):
    del run_context
    return tf.compat.v1.train.SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    global_step = run_values.results
    if self._stop_set:
      run_context.request_stop()
      return
    if not self._timer.should_trigger_for_step(global_step):
      return
    self._timer.update_last_triggered_step(global_step)
    if self._should_stop_fn():
      logging.info('Requesting early stopping at global step %d', global_step)
      run_context.session.run(self._stop_op)
      # Stop after one more step: the CheckpointSaverHook (which runs before
      # user hooks) may just have saved this step, and the checkpoint saved at
      # the end must be a new one that carries STOP=True for the evaluator.
      self._stop_set = True


class _CheckForStoppingHook(tf.compat.v1.train.SessionRunHook):
  """Non-chief hook: stops as soon as the chief has set the STOP variable."""

  def __init__(self, stop_var_device=None):
    self._stop_var_device = stop_var_device
    self._stop_var = None

  def begin(self):
    self._stop_var = _get_or_create_stop_var(self._stop_var_device)

  def before_run(self, run_context):
    del run_context
    return tf.compat.v1.train.SessionRunArgs(self._stop_var)

  def after_run(self, run_context, run_values):
    if run_values.results:
      logging.info('Early stopping requested, suspending run.')
      run_context.request_stop()


def _check_estimator(estimator):
  if not isinstance(estimator, estimator_lib.Estimator):
    raise TypeError('`estimator` must have type `tf.estimator.Estimator`. '
                    'Got: {}'.format(type(estimator)))


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
  """Builds a hook that ends training on the first check where `should_stop_fn()` is true.

  Args:
    estimator: the `Estimator` being trained.
    should_stop_fn: callable without arguments; checked on the chief only.
    run_every_secs: check every this many seconds...
    run_every_steps: ...or every this many global steps (set the other to None).

  Returns:
    A `SessionRunHook` for `TrainSpec(hooks=...)` or `Estimator.train(hooks=...)`:
    the checking hook on the chief, a hook polling the STOP variable elsewhere.

  Raises:
    TypeError: when `estimator` is not an Estimator.
    ValueError: when the check period is given in seconds and in steps at once.
  """
  _check_estimator(estimator)
  if run_every_secs is not None and run_every_steps is not None:
    raise ValueError('Only one of `run_every_secs` and `run_every_steps` must be set.')
  device = _stop_var_device(estimator)
  if estimator.config.is_chief:
    return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps, device)
  return _CheckForStoppingHook(device)


def _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, higher_is_better,
                                    eval_dir, min_steps, run_every_secs, run_every_steps):
  """Stops once an evaluation at step >= min_steps has crossed `threshold`."""
  eval_dir = eval_dir or estimator.eval_dir()
  is_lhs_better = operator.gt if higher_is_better else operator.lt
  relation = 'greater than' if higher_is_better else 'less than'

  def stop_if_threshold_crossed_fn():
    for step, metrics in read_eval_metrics(eval_dir).items():
      if step < min_steps:
        continue
      value = metrics[metric_name]
      if is_lhs_better(value, threshold):
        logging.info('At step %s, metric "%s" has value %s which is %s the configured '
                     'threshold (%s) for early stopping.', step, metric_name, value,
                     relation, threshold)
        return True
    return False

  return make_early_stopping_hook(estimator, stop_if_threshold_crossed_fn,
                                  run_every_secs=run_every_secs,
                                  run_every_steps=run_every_steps)


def _stop_if_no_metric_improvement_hook(estimator, metric_name, max_steps_without_improvement,
                                        higher_is_better, eval_dir, min_steps,
                                        run_every_secs, run_every_steps):
  """Stops once the best value is `max_steps_without_improvement` steps old."""
  eval_dir = eval_dir or estimator.eval_dir()
  is_lhs_better = operator.gt if higher_is_better else operator.lt
  improvement = 'increase' if higher_is_better else 'decrease'

  def stop_if_no_metric_improvement_fn():
    best_value, best_step = None, None
    for step, metrics in read_eval_metrics(eval_dir).items():
      if step < min_steps:
        continue
      value = metrics[metric_name]
      if best_value is None or is_lhs_better(value, best_value):
        best_value, best_step = value, step
      if step - best_step >= max_steps_without_improvement:
        logging.info('No %s in metric "%s" for %s steps, which is greater than or equal '
                     'to max steps (%s) configured for early stopping.', improvement,
                     metric_name, step - best_step, max_steps_without_improvement)
        return True
    return False

  return make_early_stopping_hook(estimator, stop_if_no_metric_improvement_fn,
                                  run_every_secs=run_every_secs,
                                  run_every_steps=run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                        run_every_secs=60, run_every_steps=None):
  """Stops training once `metric_name` > `threshold` (see the module docstring).

  Args:
    estimator: the `Estimator` being trained.
    metric_name: key of the evaluation metrics, e.g. 'accuracy'.
    threshold: the value to exceed.
    eval_dir: where the evaluation event files are (default `estimator.eval_dir()`).
    min_steps: ignore evaluations of global steps below this.
    run_every_secs: check every this many seconds...
    run_every_steps: ...or every this many steps (then pass run_every_secs=None).

  Returns:
    A `SessionRunHook`.
  """
  return _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, True, eval_dir,
                                         min_steps, run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0,
                       run_every_secs=60, run_every_steps=None):
  """Stops training once `metric_name` < `threshold`; arguments as `stop_if_higher_hook`."""
  return _stop_if_threshold_crossed_hook(estimator, metric_name, threshold, False, eval_dir,
                                         min_steps, run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Stops training when `metric_name` has not increased for that many global steps.

  Args:
    estimator: the `Estimator` being trained.
    metric_name: key of the evaluation metrics, e.g. 'accuracy'.
    max_steps_without_increase: global steps (between evaluation records, not
      a count of evaluations) after the best evaluation before stopping.
    eval_dir: where the evaluation event files are (default `estimator.eval_dir()`).
    min_steps: ignore evaluations of global steps below this.
    run_every_secs: check every this many seconds...
    run_every_steps: ...or every this many steps (then pass run_every_secs=None).

  Returns:
    A `SessionRunHook`.
  """
  return _stop_if_no_metric_improvement_hook(
      estimator, metric_name, max_steps_without_increase, True, eval_dir, min_steps,
      run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
  """Stops training when `metric_name` has not decreased for that many global steps.

  Arguments as `stop_if_no_increase_hook`, with `max_steps_without_decrease`.
  """
  return _stop_if_no_metric_improvement_hook(
      estimator, metric_name, max_steps_without_decrease, False, eval_dir, min_steps,
      run_every_secs, run_every_steps)


def checkpoint_requested_stop(checkpoint_path):
  """True when `checkpoint_path` holds a STOP variable set by an early stopping hook.

  Args:
    checkpoint_path: a checkpoint prefix such as 'model_dir/model.ckpt-100'.

  Returns:
    bool; False when the checkpoint has no such variable or cannot be read.
  """
  try:
    reader = tf.train.load_checkpoint(checkpoint_path)
    if not reader.has_tensor(STOP_VARIABLE_NAME):
      return False
    return bool(reader.get_tensor(STOP_VARIABLE_NAME))
  except (tf.errors.OpError, ValueError) as e:
    logging.warning('Could not read %s from %s: %s', STOP_VARIABLE_NAME, checkpoint_path, e)
    return False
