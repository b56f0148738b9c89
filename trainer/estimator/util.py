"""Small helpers of the Estimator: argument introspection, input_fn results, hooks.

`fn_args(fn)` names the arguments a model_fn / input_fn declares (functools
partials and bound methods included), so the Estimator can pass `mode`,
`params`, `config` and `labels` only to functions that take them.
`parse_input_fn_result(result)` turns what an input_fn returned -- a
`tf.data.Dataset`, a `(features, labels)` tuple or features alone -- into
`(features, labels, hooks)`, where a Dataset gets an initializable iterator
and a hook running its initializer when the session is created.
"""

import functools
import inspect
import os
import time

import tensorflow as tf

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
  """Runs a Dataset iterator's initializer when a session is created."""

  def __init__(self, iterator):
    self._iterator = iterator

  def begin(self):
    self._initializer = self._iterator.initializer

  def after_create_session(self, session, coord):
    del coord
    session.run(self._initializer)


def parse_input_fn_result(result):
  """Returns (features, labels, hooks) from an input_fn's return value.

  Raises:
    ValueError: for a tuple that is not (features, labels).
  """
  hooks = []
  if isinstance(result, _DATASET_TYPES):
    iterator = tf.compat.v1.data.make_initializable_iterator(result)
    hooks.append(DatasetInitializerHook(iterator))
    result = iterator.get_next()
  if isinstance(result, (list, tuple)):
    if len(result) != 2:
      raise ValueError('input_fn should return (features, labels) as a len 2 tuple.')
    return result[0], result[1], hooks
  return result, None, hooks


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
