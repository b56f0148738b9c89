"""Small helpers of the Estimator: argument introspection, input_fn results, hooks.

`fn_args(fn)` names the arguments a model_fn / input_fn declares (functools
partials and bound methods included), so the Estimator can pass `mode`,
`params`, `config` and `labels` only to functions that take them.
`parse_input_fn_result(result)` turns what an input_fn returned -- a
`tf.data.Dataset`, a `(features, labels)` tuple or features alone -- into
`(features, labels, hooks)`, where a Dataset gets an initializable iterator
and a hook running its initializer when the session is created.
The last section holds the steps `Estimator.train` takes around a TRAIN
`EstimatorSpec` before its loop (`publish_loss`, `standard_training_hooks`,
`add_default_saver`, `checkpoint_hook`, `attach_listeners`, `summary_duty`).
"""

import functools
import inspect
import os
import time

import tensorflow as tf

from core import dataset_teardown
from core import paths

_DATASET_TYPES = (tf.data.Dataset, tf.compat.v1.data.Dataset)


def fn_args(fn):
  """Names of the arguments `fn` accepts (minus those a partial binds).

  Args:
    fn: a function, bound method, callable object or functools.partial.

  Returns:
    A tuple of argument names.
  """
  if isinstance(fn, functools.partial):
    args = fn_args(fn.func)
    args = args[len(fn.args):]
    return tuple(a for a in args if a not in (fn.keywords or {}))
  if not inspect.isfunction(fn) and not inspect.ismethod(fn) and hasattr(fn, '__call__'):
    fn = fn.__call__
  params = inspect.signature(fn).parameters.values()
  return tuple(p.name for p in params
               if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                 inspect.Parameter.VAR_KEYWORD))


class DatasetInitializerHook(tf.compat.v1.train.SessionRunHook):
  """Rewinds an initializable Dataset iterator in every new session.

  `MonitoredSession` recreates its session after a failure; running the
  initializer from `after_create_session` means each fresh session starts
  reading the Dataset from the top instead of failing on an uninitialized
  iterator.
  """

  def __init__(self, iterator):
    # The initializer op already exists in the iterator's graph, so hold it.
    self._rewind = iterator.initializer

  def after_create_session(self, session, coord):
    del coord  # The initializer runs once, outside any queue runners.
    session.run(self._rewind)


def parse_input_fn_result(result):
  """Returns (features, labels, hooks) from an input_fn's return value.

  Raises:
    ValueError: for a tuple that is not (features, labels).
  """
  hooks = []
  if isinstance(result, _DATASET_TYPES):
    iterator, hooks = _dataset_iterator(result)
    result = iterator.get_next()
  return _split_features_and_labels(result) + (hooks,)


def parse_per_replica_input_fn_result(result, num_replicas):
  """Like `parse_input_fn_result`, one batch per replica of a Dataset.

  Each replica gets the next batch of the Dataset (the Dataset's batch is a
  replica's, as under tf.estimator's MirroredStrategy): replica i reads the
  i-th of `num_replicas` consecutive batches of a step, in that order.

  Args:
    result: what the input_fn returned.
    num_replicas: batches read per step.

  Returns:
    (list of features, list of labels, hooks), one entry per replica, for a
    Dataset; for any other result, `parse_input_fn_result(result)` (its
    batch is split later).
  """
  if not isinstance(result, _DATASET_TYPES):
    return parse_input_fn_result(result)
  iterator, hooks = _dataset_iterator(result)
  features, labels, previous = [], [], []
  for _ in range(num_replicas):
    with tf.control_dependencies(previous):  # Keeps batch i on replica i.
      batch = iterator.get_next()
    previous = tf.nest.flatten(batch, expand_composites=True)
    replica_features, replica_labels = _split_features_and_labels(batch)
    features.append(replica_features)
    labels.append(replica_labels)
  return features, labels, hooks


def _dataset_iterator(dataset):
  """(iterator, [hook]): a Dataset read through an iterator each new session rewinds."""
  iterator = tf.compat.v1.data.make_initializable_iterator(
      dataset_teardown.prompt_teardown(dataset))
  return iterator, [DatasetInitializerHook(iterator)]


def _split_features_and_labels(result):
  """(features, labels) of an input_fn's (or a Dataset's) element."""
  if not isinstance(result, (list, tuple)):
    return result, None  # features alone (predict, or labels inside)
  if len(result) != 2:
    raise ValueError('input_fn should return (features, labels) as a len 2 tuple.')
  features, labels = result
  return features, labels


def check_each_is(values, expected_type, message, container=list):
  """Returns `values` (None: empty) as a `container`, checking each element's type.

  Args:
    values: an iterable or None.
    expected_type: the class every element must be an instance of.
    message: the TypeError text, with `{}` for the offending element (each
      caller keeps tf.estimator's own wording).
    container: `list` or `tuple`.

  Raises:
    TypeError: for the first element of another type.
  """
  values = container(values or [])
  for value in values:
    if not isinstance(value, expected_type):
      raise TypeError(message.format(value))
  return values


def check_hooks_type(hooks):
  """Returns `hooks` as a list, checking every element is a SessionRunHook."""
  return check_each_is(hooks, tf.compat.v1.train.SessionRunHook,
                       'All hooks must be SessionRunHook instances, given: {}')


def check_listeners_type(saving_listeners):
  """Returns the listeners as a list, checking their type."""
  return check_each_is(saving_listeners, tf.compat.v1.train.CheckpointSaverListener,
                       'saving_listeners must be a list of CheckpointSaverListener, '
                       'given: {}')


class StopAfterNEvalsHook(tf.compat.v1.train.SessionRunHook):
  """Stops an evaluation after `num_evals` batches and logs progress."""

  def __init__(self, num_evals, log_progress=True):
    self._num_evals = num_evals
    self._evals_completed = 0
    self._log_progress = log_progress
    self._log_every = max(1, (num_evals or 0) // 10)

  def after_run(self, run_context, run_values):
    self._evals_completed += 1
    done = self._num_evals is not None and self._evals_completed >= self._num_evals
    if self._log_progress and self._num_evals and (
        done or self._evals_completed % self._log_every == 0):
      tf.compat.v1.logging.info('Evaluation [%d/%d]', self._evals_completed, self._num_evals)
    if done:
      run_context.request_stop()

  @property
  def evals_completed(self):
    return self._evals_completed


MAX_DIRECTORY_CREATION_ATTEMPTS = 10


def get_timestamped_export_dir(export_dir_base):
  """A path `export_dir_base/<seconds since the epoch>` (bytes) that does not exist yet.

  Two exports in the same second would collide, so on a clash this waits a
  second and takes the next timestamp, at most MAX_DIRECTORY_CREATION_ATTEMPTS
  times.

  Raises:
    RuntimeError: when every attempt found an existing directory.
  """
  base = tf.compat.as_bytes(export_dir_base)
  for attempt in range(1, MAX_DIRECTORY_CREATION_ATTEMPTS + 1):
    candidate = os.path.join(base, str(int(time.time())).encode())
    if not paths.exists(candidate):
      return candidate
    time.sleep(1)
    tf.compat.v1.logging.warning('Directory {} already exists; retrying (attempt {}/{})'.format(
        tf.compat.as_str_any(candidate), attempt, MAX_DIRECTORY_CREATION_ATTEMPTS))
  raise RuntimeError('Failed to obtain a unique export directory name after {} '
                     'attempts.'.format(MAX_DIRECTORY_CREATION_ATTEMPTS))


def get_temp_export_dir(timestamped_export_dir):
  """`<base>/temp-<timestamp>` (bytes), where an export is written before its rename."""
  head, tail = os.path.split(tf.compat.as_bytes(timestamped_export_dir))
  return os.path.join(head, b'temp-' + tail)


# Training-session plumbing --------------------------------------------------
# What `Estimator.train` adds around a TRAIN EstimatorSpec before its loop.


def publish_loss(loss):
  """Makes the loss visible to TensorBoard (as `loss`) and to the LOSSES collection."""
  summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
  if 'loss' not in {summary.op.name for summary in summaries}:
    tf.compat.v1.summary.scalar('loss', loss)
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, loss)


def standard_training_hooks(spec, global_step, hooks, config):
  """`hooks`, then NaN and loss-logging hooks, then the spec's own training hooks.

  Args:
    spec: the TRAIN EstimatorSpec.
    global_step: the global step tensor, logged beside the loss.
    hooks: the caller's and the input_fn's hooks.
    config: the RunConfig (`log_step_count_steps`; None turns logging off).

  Returns:
    A new list of hooks for every training task.
  """
  every_n = config.log_step_count_steps
  logging_hooks = [] if every_n is None else [tf.compat.v1.train.LoggingTensorHook(
      {'loss': spec.loss, 'step': global_step}, every_n_iter=every_n)]
  return (list(hooks) + [tf.compat.v1.train.NanTensorHook(spec.loss)] + logging_hooks +
          list(spec.training_hooks))


def add_default_saver(scaffold, config):
  """Registers a sharded Saver built from `config` unless the model brought its own."""
  if scaffold.saver or tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS):
    return
  saver = tf.compat.v1.train.Saver(
      sharded=True, defer_build=True, save_relative_paths=True,
      max_to_keep=config.keep_checkpoint_max,
      keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours)
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)


def checkpoint_hook(spec, worker_hooks, config, model_dir):
  """Finds the hook that writes checkpoints, making one when `config` asks for saves.

  Args:
    spec: the TRAIN EstimatorSpec (its chief hooks and scaffold).
    worker_hooks: hooks of every training task.
    config: the RunConfig (`save_checkpoints_secs` / `_steps`).
    model_dir: where a new hook writes.

  Returns:
    (extra chief hooks as a tuple, the CheckpointSaverHook in charge or None).
  """
  candidates = [hook for hook in worker_hooks + list(spec.training_chief_hooks)
                if isinstance(hook, tf.compat.v1.train.CheckpointSaverHook)]
  if candidates:
    # A model_fn or caller that brought its own saver hook keeps it.
    return (), candidates[0]
  if not (config.save_checkpoints_secs or config.save_checkpoints_steps):
    return (), None
  hook = tf.compat.v1.train.CheckpointSaverHook(
      model_dir, save_secs=config.save_checkpoints_secs,
      save_steps=config.save_checkpoints_steps, scaffold=spec.scaffold,
      save_graph_def=config.checkpoint_save_graph_def)
  return (hook,), hook


def attach_listeners(saver_hook, saving_listeners):
  """Hands `saving_listeners` to `saver_hook`, each listener once.

  Raises:
    ValueError: when there are listeners but no hook saves checkpoints.
  """
  if not saving_listeners:
    return
  if saver_hook is None:
    raise ValueError('There should be a CheckpointSaverHook to use saving_listeners. '
                     'Please set one of the RunConfig.save_checkpoints_steps or '
                     'RunConfig.save_checkpoints_secs.')
  registered = saver_hook._listeners  # pylint: disable=protected-access
  registered.extend(listener for listener in saving_listeners if listener not in registered)


def summary_duty(spec, worker_hooks, config, model_dir):
  """Decides who writes summaries and step rates; may append to `worker_hooks`.

  Args:
    spec: the TRAIN EstimatorSpec (its scaffold).
    worker_hooks: this task's hook list, extended in place on worker 0.
    config: the RunConfig (cluster, task and cadences).
    model_dir: where worker 0's summaries go.

  Returns:
    (save_summary_steps, log_step_count_steps) for the chief's session.
  """
  jobs = config.cluster_spec.jobs
  if 'master' not in jobs or 'worker' not in jobs:
    return config.save_summary_steps, config.log_step_count_steps
  # The master spends long stretches evaluating, so its summaries would come
  # at uneven steps; worker 0 takes the duty over and the chief's is off.
  if config.task_type == 'worker' and config.task_id == 0:
    if config.save_summary_steps:
      worker_hooks.append(tf.compat.v1.train.SummarySaverHook(
          save_steps=config.save_summary_steps, output_dir=model_dir,
          scaffold=spec.scaffold))
    if config.log_step_count_steps:
      worker_hooks.append(tf.compat.v1.train.StepCounterHook(
          every_n_steps=config.log_step_count_steps, output_dir=model_dir))
  return None, None
