"""`tfe.experimental.InMemoryEvaluatorHook` and `make_stop_at_checkpoint_step_hook`.

`InMemoryEvaluatorHook` evaluates inside the training process, on the
variables the training session holds right now, without a checkpoint:

    evaluator = tfe.experimental.InMemoryEvaluatorHook(
        estimator, eval_input_fn, steps=10, every_n_iter=500)
    estimator.train(train_input_fn, hooks=[evaluator])

At `begin` it builds the EVAL graph of the Estimator's model_fn once (in a
graph of its own) with one placeholder-fed assign per global variable. Every
`every_n_iter` training steps, and once more when training ends, it reads the
training variables (matched by name), feeds them to a fresh evaluation
session, runs the metrics over `steps` batches (None: until `input_fn` is
exhausted) and writes them to `estimator.eval_dir(name)` as `evaluate()`
does, so `tfe.experimental.read_eval_metrics` and early-stopping hooks see
them.

`make_stop_at_checkpoint_step_hook(estimator, last_step)` stops a non-chief
worker once the chief has *saved* a checkpoint at `last_step` (the chief
itself gets a plain `StopAtStepHook(last_step=last_step)`), so workers do not
quit before the last checkpoint exists.

Differs on purpose: an evaluation variable that the training graph lacks is a
ValueError naming it (instead of a failed restore later).
"""

import time

import tensorflow as tf
from core import logs as logging

from estimator import estimator as estimator_lib
from estimator import model_fn as model_fn_lib
from estimator import util
from estimator.eval_summaries import write_dict_to_summary

__all__ = ['InMemoryEvaluatorHook', 'make_stop_at_checkpoint_step_hook']

_GLOBAL_STEP_KEY = estimator_lib.GLOBAL_STEP_KEY


class InMemoryEvaluatorHook(tf.compat.v1.train.SessionRunHook):
  """Evaluates `estimator` on `input_fn` every `every_n_iter` steps of its training."""

  def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None, every_n_iter=100):
    """Args as tf.estimator.experimental.InMemoryEvaluatorHook.

    Args:
      estimator: the `tfe.Estimator` being trained.
      input_fn: the evaluation input_fn.
      steps: batches per evaluation (None: until input_fn is exhausted).
      hooks: extra `SessionRunHook`s for the evaluation sessions.
      name: evaluation name (events go to `eval_<name>/`).
      every_n_iter: evaluate after every this many training steps.

    Raises:
      ValueError: every_n_iter <= 0, or `estimator` is not an Estimator.
      TypeError: a hook that is not a SessionRunHook.
    """
    if every_n_iter is None or every_n_iter <= 0:
      raise ValueError('invalid every_n_iter={}.'.format(every_n_iter))
    if not isinstance(estimator, estimator_lib.Estimator):
      raise ValueError('estimator must be a tfe.Estimator, given {!r}'.format(estimator))
    self._estimator = estimator
    self._input_fn = input_fn
    self._steps = steps
    self._hooks = util.check_hooks_type(hooks)
    self._name = name
    self._every_n_iter = every_n_iter
    self._iter_count = 0

  def begin(self):
    """Builds the evaluation graph and pairs its variables with the training graph's."""
    if tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS):
      raise ValueError('InMemoryEvaluator does not support custom saveables (the training '
                       'graph has SAVEABLE_OBJECTS); evaluate from checkpoints instead.')
    train_vars = {v.op.name: v for v in tf.compat.v1.global_variables()}
    estimator = self._estimator
    self._graph = tf.Graph()
    with self._graph.as_default():
      tf.compat.v1.set_random_seed(estimator.config.tf_random_seed)
      global_step = estimator._create_and_assert_global_step(self._graph)  # pylint: disable=protected-access
      features, labels, self._input_hooks = (
          estimator._get_features_and_labels_from_input_fn(  # pylint: disable=protected-access
              self._input_fn, model_fn_lib.ModeKeys.EVAL))
      spec = estimator._call_model_fn(  # pylint: disable=protected-access
          features, labels, model_fn_lib.ModeKeys.EVAL, estimator.config)
      self._update_op, self._eval_dict = estimator._metric_ops(spec)  # pylint: disable=protected-access
      self._eval_dict[_GLOBAL_STEP_KEY] = global_step
      self._evaluation_hooks = list(spec.evaluation_hooks)
      self._sources, self._placeholders, assigns = [], [], []
      for var in tf.compat.v1.global_variables():
        if var.op.name not in train_vars:
          raise ValueError('Variable {} of the evaluation graph is not in the training graph; '
                           'InMemoryEvaluatorHook needs the same variables in both.'.format(
                               var.op.name))
        placeholder = tf.compat.v1.placeholder(var.dtype.base_dtype, var.shape)
        self._sources.append(train_vars[var.op.name])
        self._placeholders.append(placeholder)
        assigns.append(tf.compat.v1.assign(var, placeholder))
      feed_op = tf.group(*assigns)

      def init_fn(scaffold, session):
        del scaffold
        session.run(feed_op, feed_dict=dict(zip(self._placeholders, self._values)))

      self._scaffold = tf.compat.v1.train.Scaffold(init_fn=init_fn)
    self._values = None

  def after_run(self, run_context, run_values):
    self._iter_count += 1
    if self._iter_count % self._every_n_iter == 0:
      self._evaluate(run_context.session)

  def end(self, session):
    self._evaluate(session)

  def _evaluate(self, train_session):
    """Copies the training variables in and runs one evaluation; writes its summaries."""
    self._values = train_session.run(self._sources)
    final_hook = tf.compat.v1.train.FinalOpsHook(self._eval_dict)
    hooks = (list(self._input_hooks) + self._hooks + self._evaluation_hooks +
             [util.StopAfterNEvalsHook(self._steps, log_progress=False), final_hook])
    start = time.time()
    with self._graph.as_default():
      creator = tf.compat.v1.train.ChiefSessionCreator(
          scaffold=self._scaffold, config=self._estimator.config.session_config)
      with tf.compat.v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as session:
        while not session.should_stop():
          session.run(self._update_op)
    results = final_hook.final_ops_values
    step = int(results[_GLOBAL_STEP_KEY])
    logging.info('In-memory evaluation at step %d (%.2fs): %s', step, time.time() - start,
                 results)
    write_dict_to_summary(self._estimator.eval_dir(self._name), results, step)


class _StopAtCheckpointStepHook(tf.compat.v1.train.SessionRunHook):
  """Stops once the global step and the newest checkpoint's step reach `last_step`."""

  def __init__(self, model_dir, last_step, wait_after_file_check_secs=30):
    self._model_dir = model_dir
    self._last_step = last_step
    self._wait_after_file_check_secs = wait_after_file_check_secs

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()
    if self._global_step is None:
      raise RuntimeError('Global step should be created to use StopAtCheckpointStepHook.')

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    if run_values.results + 1 < self._last_step:
      return
    saved = estimator_lib.load_global_step_from_checkpoint_dir(self._model_dir)
    if saved >= self._last_step:
      run_context.request_stop()
    else:
      time.sleep(self._wait_after_file_check_secs)


def make_stop_at_checkpoint_step_hook(estimator, last_step, wait_after_file_check_secs=30):
  """A hook stopping training at `last_step`: plain on the chief, checkpoint-aware elsewhere.

  Args:
    estimator: the `tfe.Estimator` being trained.
    last_step: the global step to stop at.
    wait_after_file_check_secs: seconds a worker waits between checkpoint checks.

  Returns:
    A `SessionRunHook`.
  """
  if estimator.config.is_chief:
    return tf.compat.v1.train.StopAtStepHook(last_step=last_step)
  return _StopAtCheckpointStepHook(estimator.model_dir, last_step, wait_after_file_check_secs)
