"""`train_and_evaluate`: train, evaluate new checkpoints and export, locally or on a cluster.

The same call works on a laptop and on a cluster; TF_CONFIG (read by
`RunConfig`) decides what this process does:

    train_spec = tfe.TrainSpec(train_input_fn, max_steps=10000)
    eval_spec = tfe.EvalSpec(eval_input_fn, steps=100, throttle_secs=60,
                             exporters=tfe.BestExporter(
                                 serving_input_receiver_fn=serving_input_receiver_fn))
    metrics, export_results = tfe.train_and_evaluate(estimator, train_spec, eval_spec)

* no cluster in TF_CONFIG (local): one `train()` call; whenever a checkpoint
  is saved it is evaluated, unless the last evaluation is less than
  `throttle_secs` old (that skip is logged as a warning, naming the fix:
  `throttle_secs=0` evaluates every checkpoint). The checkpoint at the end
  of training is always evaluated and is the final export. Returns the last
  metrics and export results.
* `chief` / `master`: trains (the master also evaluates, as in local mode),
  then tells the ps tasks that it finished.
* `worker`: waits a little (`min(60, 5 * (index + 1))` seconds, as
  tf.estimator) so the chief can initialise the model, trains, then tells the
  ps tasks that it finished.
* `ps`: serves the variables until the chief and every worker said they
  finished (or the workers' grace period after the chief ran out), then
  returns (tf.estimator's ps ran `server.join()` forever). The done signal is
  `deployment.cluster_runtime`'s, the same as `python -m trainer.train`'s.
* faults of a cluster with ps tasks (the fault runtime of both paths,
  deployment/fault_runtime.py, through estimator/faults.py): a ps
  killed and restarted makes the chief and the workers rebuild their
  session (the chief restores the latest checkpoint), bounded by
  `RunConfig.recovery_timeout_secs` (then `SystemExit` 129); after SIGTERM
  the chief checkpoints the step reached and every task, ps included, raises
  `faults.TrainingPreempted` (a `SystemExit` with code 143) within
  `RunConfig.termination_grace_secs`; a ps whose chief is lost raises
  `faults.TaskFailed` (129); a ps cut off by the network
  (`recovery_timeout_secs` without a finished step) or a lost chief
  (`RunConfig.chief_timeout_secs`, workers) ends a task with 129 too.
* a chief, worker or ps started when model_dir already holds a checkpoint
  at `max_steps` or beyond (a task restarted after its job finished) returns
  at once instead of waiting for peers that have exited.
* `evaluator` (outside the cluster, reading model_dir): after
  `start_delay_secs`, evaluates each new checkpoint at most every
  `throttle_secs` and returns after the final one (global step >= max_steps,
  or the checkpoint carries an early-stopping STOP flag); tf.estimator's
  evaluator never returned when max_steps was not reached.

Exports go to `model_dir/export/<exporter name>/<timestamp>/`.
"""

import collections
import contextlib
import time

from core import logs as logging
import tensorflow as tf

from core import checkpoints
from core import paths
from deployment import cluster as cluster_lib
from deployment import cluster_check
from deployment import cluster_runtime
from estimator import early_stopping
from estimator import estimator as estimator_lib
from estimator import exporter as exporter_lib
from estimator import faults
from estimator import util

_MISSING_CHECKPOINT_WARNING_SECS = 600
_MAX_WORKER_DELAY_SECS = 60
# How long a worker or ps waits for the chief to publish its cluster (cluster_check).
_STARTUP_TIMEOUT_SECS = 600
_WORKER_DELAY_SECS_PER_INDEX = 5


def _validate_input_fn(input_fn):
  if not callable(input_fn):
    raise TypeError('`input_fn` must be callable, given: {}'.format(input_fn))


def _validate_hooks(hooks):
  """Returns `hooks` as a tuple of SessionRunHooks."""
  return util.check_each_is(hooks, tf.compat.v1.train.SessionRunHook,
                            'All hooks must be `SessionRunHook` instances, given: {}', tuple)


def _validate_saving_listeners(saving_listeners):
  """Returns `saving_listeners` as a tuple of CheckpointSaverListeners."""
  return util.check_each_is(
      saving_listeners, tf.compat.v1.train.CheckpointSaverListener,
      'All saving_listeners must be `CheckpointSaverListener` instances, given: {}', tuple)


def _validate_exporters(exporters):
  """Returns `exporters` (None, one Exporter or an iterable of them) as a tuple."""
  if not exporters:
    return ()
  if isinstance(exporters, exporter_lib.Exporter):
    exporters = [exporters]
  not_exporters = TypeError('`exporters` must be an Exporter, an iterable of Exporter, or '
                            '`None`, found %s.' % (exporters,))
  try:
    exporters = list(exporters)
  except TypeError:
    raise not_exporters from None
  if not all(isinstance(exporter, exporter_lib.Exporter) for exporter in exporters):
    raise not_exporters
  all_names = [e.name for e in exporters]
  names = []
  for exporter in exporters:
    if not exporter.name:
      raise ValueError('An Exporter cannot have a name that is `None` or empty. All exporter '
                       'names: %s' % all_names)
    if not isinstance(exporter.name, str):
      raise ValueError('An Exporter must have a string name. Given: %s' % type(exporter.name))
    if exporter.name in names:
      raise ValueError('`exporters` must have unique names. Such a name cannot be `None`. '
                       '%s names were given: %s' % (exporter.name, all_names))
    names.append(exporter.name)
  return tuple(exporters)


class TrainSpec(collections.namedtuple(
    'TrainSpec', ['input_fn', 'max_steps', 'hooks', 'saving_listeners'])):
  """What `train_and_evaluate` trains on, and for how long."""

  def __new__(cls, input_fn, max_steps=None, hooks=None, saving_listeners=None):
    """Checks and stores the training half of `train_and_evaluate`.

    Args:
      input_fn: returns a Dataset or (features, labels) for training.
      max_steps: train until the global step reaches this (None: until the
        input ends or a hook stops training).
      hooks: SessionRunHooks for every training task.
      saving_listeners: CheckpointSaverListeners for the chief.

    Raises:
      TypeError, ValueError: for invalid arguments (tf.estimator's texts).
    """
    _validate_input_fn(input_fn)
    if max_steps is not None and max_steps <= 0:
      raise ValueError('Must specify max_steps > 0, given: {}'.format(max_steps))
    return super(TrainSpec, cls).__new__(
        cls, input_fn=input_fn, max_steps=max_steps, hooks=_validate_hooks(hooks),
        saving_listeners=_validate_saving_listeners(saving_listeners))


class EvalSpec(collections.namedtuple('EvalSpec', [
    'input_fn', 'steps', 'name', 'hooks', 'exporters', 'start_delay_secs',
    'throttle_secs'])):
  """What `train_and_evaluate` evaluates on, how often, and what it exports."""

  def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None,
              start_delay_secs=120, throttle_secs=600):
    """Checks and stores the evaluation half of `train_and_evaluate`.

    Args:
      input_fn: returns a Dataset or (features, labels) for evaluation.
      steps: batches per evaluation; None evaluates until the input ends.
      name: evaluation name; metrics go to `model_dir/eval_<name>`.
      hooks: SessionRunHooks for evaluation.
      exporters: an Exporter or an iterable of Exporters with unique names.
      start_delay_secs: the evaluator task waits this long before its first
        evaluation (ignored in local mode).
      throttle_secs: minimum seconds between two evaluations; skipped
        checkpoints are logged. 0 evaluates every new checkpoint.

    Raises:
      TypeError, ValueError: for invalid arguments (tf.estimator's texts).
    """
    _validate_input_fn(input_fn)
    if steps is not None and steps <= 0:
      raise ValueError('Must specify steps > 0, given: {}'.format(steps))
    if name is not None and not isinstance(name, str):
      raise TypeError('`name` must be string, given: {}'.format(name))
    hooks = _validate_hooks(hooks)
    exporters = _validate_exporters(exporters)
    if start_delay_secs < 0:
      raise ValueError('Must specify start_delay_secs >= 0, given: {}'.format(start_delay_secs))
    if throttle_secs < 0:
      raise ValueError('Must specify throttle_secs >= 0, given: {}'.format(throttle_secs))
    return super(EvalSpec, cls).__new__(
        cls, input_fn=input_fn, steps=steps, name=name, hooks=hooks, exporters=exporters,
        start_delay_secs=start_delay_secs, throttle_secs=throttle_secs)


def train_and_evaluate(estimator, train_spec, eval_spec):
  """Trains, evaluates and exports `estimator` as this process's TF_CONFIG task says.

  Args:
    estimator: an `Estimator`.
    train_spec: a `TrainSpec`.
    eval_spec: an `EvalSpec`.

  Returns:
    (metrics of the last evaluation, list of export results of that
    evaluation) in local mode, on the master and on the evaluator;
    (None, []) on chief, worker and ps tasks.

  Raises:
    TypeError: for arguments of the wrong type.
    ValueError: for an unusable task configuration.
    RuntimeError: when no checkpoint could be evaluated in local mode.
  """
  for name, value, expected in (('estimator', estimator, estimator_lib.Estimator),
                                ('train_spec', train_spec, TrainSpec),
                                ('eval_spec', eval_spec, EvalSpec)):
    if not isinstance(value, expected):
      raise TypeError('`{}` must have type `tf.estimator.{}`. Got: {}'.format(
          name, expected.__name__, type(value)))
  config = estimator.config
  if config.task_type == 'evaluator' and config.task_id > 0:
    raise ValueError('For distributed training, there can only be one `evaluator` task '
                     '(with task id 0).  Given task id {}'.format(config.task_id))
  return _TrainingExecutor(estimator, train_spec, eval_spec).run()


_EvalResult = collections.namedtuple('_EvalResult', ['status', 'metrics', 'checkpoint_path'])
_EVALUATED = 'evaluated'
_MISSING_CHECKPOINT = 'missing checkpoint'
_NO_NEW_CHECKPOINT = 'no new checkpoint'


class _Evaluator(object):
  """Evaluates the latest checkpoint (once per checkpoint) and runs the exporters."""

  def __init__(self, estimator, eval_spec, max_training_steps):
    self._estimator = estimator
    self._eval_spec = eval_spec
    self._max_training_steps = max_training_steps
    self._previous_checkpoint_path = None
    self._last_missing_warning = None
    self.last_result = None
    self.last_export_results = []
    self.final_export_done = False

  def is_final(self, eval_result):
    """True when `eval_result` is of the last checkpoint training will write."""
    step = eval_result.metrics['global_step']
    if self._max_training_steps and step >= self._max_training_steps:
      return True
    return early_stopping.checkpoint_requested_stop(eval_result.checkpoint_path)

  def evaluate_and_export(self, is_the_final_export=None, checkpoint_path=None):
    """Evaluates the latest checkpoint if it is new, then exports.

    Args:
      is_the_final_export: True/False, or None to decide with `is_final`.
      checkpoint_path: the checkpoint to evaluate (default: the latest).

    Returns:
      An `_EvalResult`; `last_result` / `last_export_results` hold the latest evaluation.
    """
    checkpoint_path = checkpoint_path or self._estimator.latest_checkpoint()
    if not checkpoint_path:
      now = time.time()
      if (self._last_missing_warning is None or
          now - self._last_missing_warning >= _MISSING_CHECKPOINT_WARNING_SECS):
        self._last_missing_warning = now
        logging.warning('Estimator is not trained yet. Will start an evaluation when a '
                        'checkpoint is ready.')
      return _EvalResult(_MISSING_CHECKPOINT, None, None)
    if checkpoint_path == self._previous_checkpoint_path:
      logging.info('No new checkpoint ready for evaluation. Skip the current evaluation pass '
                   'as evaluation results are expected to be same for the same checkpoint.')
      return _EvalResult(_NO_NEW_CHECKPOINT, None, None)
    try:
      metrics = self._estimator.evaluate(
          self._eval_spec.input_fn, steps=self._eval_spec.steps, name=self._eval_spec.name,
          checkpoint_path=checkpoint_path, hooks=self._eval_spec.hooks)
    except (ValueError, tf.errors.NotFoundError):
      if paths.exists(checkpoint_path + '.index'):
        raise
      # The trainer's Saver deleted it (keep_checkpoint_max) before or while
      # it was read: evaluate the next latest one instead of dying.
      logging.warning('Checkpoint %s was deleted before it could be evaluated (the trainer '
                      'keeps only RunConfig.keep_checkpoint_max checkpoints); skipping it.',
                      checkpoint_path)
      return _EvalResult(_NO_NEW_CHECKPOINT, None, None)
    if not isinstance(metrics, dict):
      raise TypeError('`Estimator.evaluate` should return dict. Given {}.'.format(
          type(metrics)))
    if 'global_step' not in metrics:
      raise ValueError('Internal error: `Estimator.evaluate` should have `global_step` in '
                       'result. Given {}'.format(metrics))
    self._previous_checkpoint_path = checkpoint_path
    result = _EvalResult(_EVALUATED, metrics, checkpoint_path)
    if is_the_final_export is None:
      is_the_final_export = self.is_final(result)
    # Estimator.evaluate has logged the results ("Saving dict for global step
    # N: ..."); one line per evaluation, as tf.estimator printed.
    self.last_result = result
    self.last_export_results = self.export(result, is_the_final_export)
    return result

  def export(self, eval_result, is_the_final_export):
    """Runs every exporter of the EvalSpec on `eval_result`; returns their results."""
    export_results = []
    for exporter in self._eval_spec.exporters:
      export_path = paths.join(tf.compat.as_str_any(self._estimator.model_dir), 'export',
                                 exporter.name)
      export_results.append(exporter.export(
          self._estimator, export_path, eval_result.checkpoint_path, eval_result.metrics,
          is_the_final_export))
    if is_the_final_export:
      self.final_export_done = True
    return export_results


class _EvaluateOnSaveListener(tf.compat.v1.train.CheckpointSaverListener):
  """Evaluates new checkpoints as the chief saves them, at most every throttle_secs."""

  def __init__(self, evaluator, throttle_secs):
    self._evaluator = evaluator
    self._throttle_secs = throttle_secs
    self._timer = None
    self._last_eval_time = 0.0
    self._is_first_save = True

  def begin(self):
    self._timer = tf.compat.v1.train.SecondOrStepTimer(every_secs=self._throttle_secs)
    self._is_first_save = True

  def after_save(self, session, global_step_value):
    del session
    if self._is_first_save:
      # The checkpoint written when the session starts holds what was restored
      # (or the initial values): nothing new to evaluate.
      self._is_first_save = False
      return
    if self._timer.should_trigger_for_step(global_step_value):
      self._timer.update_last_triggered_step(global_step_value)
      self._last_eval_time = time.time()
      self._evaluator.evaluate_and_export()
    else:
      elapsed = time.time() - self._last_eval_time
      logging.warning(
          'Skip the current checkpoint eval due to throttle secs (%s secs): step %d was saved '
          '%.0f secs after the last evaluation. Evaluated next: the first checkpoint saved '
          'after %.0f more secs, and the last checkpoint of training. Set '
          'EvalSpec(throttle_secs=0) to evaluate every checkpoint.', self._throttle_secs,
          global_step_value, elapsed, max(0.0, self._throttle_secs - elapsed))

  def end(self, session, global_step_value):
    del session
    if faults.sigterm_heard():
      logging.warning('SIGTERM: step %d is not the end of training; no final evaluation '
                      'or export', global_step_value)
      return
    _evaluate_final(self._evaluator, global_step_value)


def _evaluate_final(evaluator, global_step_value=None):
  """Makes sure the last checkpoint is evaluated and given to the exporters as final."""
  last = evaluator.last_result
  if (last is not None and global_step_value is not None and
      last.metrics['global_step'] == global_step_value):
    if not evaluator.final_export_done:
      evaluator.last_export_results = evaluator.export(last, is_the_final_export=True)
    return
  result = evaluator.evaluate_and_export(is_the_final_export=True)
  if (result.status == _NO_NEW_CHECKPOINT and last is not None and
      not evaluator.final_export_done):
    evaluator.last_export_results = evaluator.export(last, is_the_final_export=True)


class _TrainingExecutor(object):
  """Runs the role of this process (from `estimator.config`)."""

  def __init__(self, estimator, train_spec, eval_spec):
    self._estimator = estimator
    self._train_spec = train_spec
    self._eval_spec = eval_spec
    self._config = estimator.config

  def run(self):
    """Dispatches on the task type; returns (metrics, export_results)."""
    config = self._config
    cluster_spec = getattr(config, 'cluster_spec', None)
    if not cluster_spec and config.task_type != 'evaluator':
      logging.info('Running training and evaluation locally (non-distributed).')
      return self.run_local()
    if not config.task_type or not isinstance(config.task_type, str):
      raise ValueError('`estimator.config` must have task_type set. This usually means '
                       'TF_CONFIG environment is not set correctly.')
    if config.task_type == 'local':
      raise ValueError('`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and '
                       '`task` properties in TF_CONFIG absent triggers train and evaluate '
                       '`Estimator` locally (non-distributed).')
    runner = getattr(self, 'run_' + config.task_type, None)
    if runner is None:
      raise ValueError('Task type {} is not supported. Supported task types are {}'.format(
          config.task_type, ['chief', 'evaluator', 'master', 'ps', 'worker']))
    logging.info('Running train_and_evaluate as task %s:%s', config.task_type,
                 config.task_id)
    return runner()

  def _new_evaluator(self):
    return _Evaluator(self._estimator, self._eval_spec, self._train_spec.max_steps)

  def _train(self, saving_listeners=()):
    self._estimator.train(self._train_spec.input_fn, max_steps=self._train_spec.max_steps,
                          hooks=list(self._train_spec.hooks),
                          saving_listeners=list(saving_listeners))

  def _train_and_evaluate_in_process(self):
    """Local mode and the master: one train() call that evaluates as it saves."""
    if self._eval_spec.start_delay_secs:
      logging.info('start_delay_secs (%s) is ignored when evaluating in the training '
                   'process.', self._eval_spec.start_delay_secs)
    evaluator = self._new_evaluator()
    listener = _EvaluateOnSaveListener(evaluator, self._eval_spec.throttle_secs)
    self._train(list(self._train_spec.saving_listeners) + [listener])
    if evaluator.last_result is None or not evaluator.final_export_done:
      # train() saved nothing new (max_steps was already reached, say): the
      # latest checkpoint is still the final one and gets evaluated here.
      _evaluate_final(evaluator)
    if evaluator.last_result is None:
      raise RuntimeError('There was no new checkpoint after the training. Eval status: '
                         '{}'.format(_MISSING_CHECKPOINT))
    return evaluator.last_result.metrics, evaluator.last_export_results

  def run_local(self):
    return self._train_and_evaluate_in_process()

  def _cluster(self):
    """This task as a `deployment.cluster.ClusterConfig` (for cluster_runtime)."""
    return cluster_lib.ClusterConfig(self._config.cluster_spec.as_dict(),
                                     self._config.task_type, self._config.task_id)

  def _start_server(self):
    """Starts this task's gRPC server unless the cluster has a single task."""
    cluster = self._cluster()
    if not cluster.is_distributed:
      return None
    server_config = tf.compat.v1.ConfigProto(log_device_placement=False)
    session_config = getattr(self._config, 'session_config', None)
    if session_config is not None:
      server_config.gpu_options.CopyFrom(session_config.gpu_options)
    logging.info('Starting the server of task %s:%d', cluster.task_type, cluster.task_index)
    return cluster_check.start_server_and_agree(cluster, _STARTUP_TIMEOUT_SECS,
                                                config=server_config)

  def _finish_chief(self, server):
    """Tells the ps tasks that the chief finished (they wait for the workers)."""
    cluster = self._cluster()
    if server is not None and cluster.num_ps_tasks:
      cluster_runtime.signal_training_done(server.target, cluster)

  @contextlib.contextmanager
  def _telling_ps_of_preemption(self, server):
    """A task stopped by SIGTERM tells the ps tasks so before `TrainingPreempted` goes on."""
    try:
      yield
    except faults.TrainingPreempted as e:
      logging.warning('%s', e)
      faults.signal_preempted(server, self._config)
      raise

  def _already_finished(self):
    """Whether model_dir holds the end of training (its peers have exited then)."""
    max_steps = self._train_spec.max_steps
    step = checkpoints.finished_step(self._estimator.model_dir, max_steps)
    if step is None:
      return False
    logging.info('training already finished: %s holds a checkpoint at global step %d >= '
                 'TrainSpec.max_steps=%d; %s task %d has nothing to do',
                 self._estimator.model_dir, step, max_steps, self._config.task_type,
                 self._config.task_id)
    return True

  def run_chief(self):
    if self._already_finished():
      return None, []
    server = self._start_server()
    with self._telling_ps_of_preemption(server):
      self._train(self._train_spec.saving_listeners)
    self._finish_chief(server)
    return None, []

  def run_master(self):
    server = self._start_server()
    with self._telling_ps_of_preemption(server):
      result = self._train_and_evaluate_in_process()
    self._finish_chief(server)
    return result

  def run_worker(self):
    if self._already_finished():
      return None, []
    server = self._start_server()
    task_id = self._config.task_id
    max_delay = getattr(self._config, 'experimental_max_worker_delay_secs', None)
    delay = min(_MAX_WORKER_DELAY_SECS if max_delay is None else max_delay,
                (task_id + 1) * _WORKER_DELAY_SECS_PER_INDEX)
    if delay > 0:
      logging.info('Waiting %d secs before starting training.', delay)
      time.sleep(delay)
    with self._telling_ps_of_preemption(server):
      self._train()
    if server is not None:
      # The ps tasks exit once the chief and every worker said they are done.
      cluster_runtime.signal_training_done(server.target, self._cluster())
    return None, []

  def run_ps(self):
    if self._already_finished():
      return None, []
    server = self._start_server()
    if server is None:
      raise ValueError('A ps task needs a cluster with more than one task; got {}'.format(
          self._config.cluster_spec.as_dict()))
    # Raises TrainingPreempted (143) after SIGTERM, TaskFailed (129) for a lost chief.
    faults.serve_ps(server, self._config)
    return None, []

  def run_evaluator(self):
    """Evaluates new checkpoints until the final one has been evaluated."""
    if self._eval_spec.start_delay_secs:
      logging.info('Waiting %d secs before starting eval.', self._eval_spec.start_delay_secs)
      time.sleep(self._eval_spec.start_delay_secs)
    if not self._train_spec.max_steps:
      logging.warning('TrainSpec.max_steps is None: the evaluator returns only after a '
                      'checkpoint written after early stopping.')
    evaluator = self._new_evaluator()
    if not self._estimator.latest_checkpoint():
      logging.warning('Estimator is not trained yet. Will start an evaluation when a '
                      'checkpoint is ready.')

    def evaluate(checkpoint_path):
      return evaluator.evaluate_and_export(checkpoint_path=checkpoint_path)

    def final_checkpoint_evaluated(unused_path, result, unused_count):
      if result.status != _EVALUATED or not evaluator.is_final(result):
        return None
      logging.info('Exiting evaluation, the final checkpoint %s (global step %d) has been '
                   'evaluated.', result.checkpoint_path, result.metrics['global_step'])
      return 'final_checkpoint'

    # The shared loop polls the checkpoint state once a second, so throttle_secs=0
    # does not spin on an unchanged model_dir.
    outcome = checkpoints.follow_checkpoints(
        self._estimator.model_dir, evaluate, min_interval_secs=self._eval_spec.throttle_secs,
        stop_fn=final_checkpoint_evaluated)
    return outcome.result.metrics, evaluator.last_export_results
