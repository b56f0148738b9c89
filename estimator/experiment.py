"""`Experiment`: tf.contrib.learn's training/evaluation bundle, on slimtrain's estimator.

Scripts written for TF 1.x contrib keep an Experiment: an estimator, its
train and eval input_fns and step counts, built by an `experiment_fn` that
`learn_runner.run` calls and then runs one *schedule* (a method name) of. The
methods map onto the estimator and `tfe.train_and_evaluate`:

    train()               estimator.train(train_input_fn, max_steps=train_steps);
                          on a TF_CONFIG chief/worker: train_and_evaluate's task
    evaluate()            estimator.evaluate(eval_input_fn, steps=eval_steps)
    train_and_evaluate()  locally: train and evaluate every min_eval_frequency
                          steps (None: every checkpoint, via tfe.train_and_evaluate;
                          0: once at the end), then export; on a cluster:
                          tfe.train_and_evaluate
    continuous_eval()     evaluate each new checkpoint; returns once one reaches
                          train_steps (contrib's never returned)
    continuous_train_and_eval()  alternate train_steps_per_iteration steps of
                          training with an evaluation
    local_run()           contrib's oldest schedule: evaluate every
                          local_eval_frequency steps (None: once, at the end)
    run_std_server()      a ps task: serve until training is over
    test()                one training step and one evaluation step

Usage:

    import estimator as tfe

    def experiment_fn(run_config, hparams):
      estimator = tfe.Estimator(model_fn, config=run_config, params=hparams.values())
      return tfe.Experiment(estimator, train_input_fn, eval_input_fn,
                            train_steps=1000, eval_steps=10, min_eval_frequency=200,
                            export_strategies=[tfe.FinalExporter('final', receiver_fn)])

    tfe.learn_runner.run(experiment_fn, run_config=tfe.RunConfig(model_dir='/tmp/m'),
                         hparams=tfe.HParams(learning_rate=0.1))

`export_strategies` takes tf.estimator exporters (FinalExporter, LatestExporter,
BestExporter), which replaced contrib's ExportStrategy; exports go to
`model_dir/export/<exporter name>/<timestamp>/`.
"""

import inspect
import math
import time

from core import logs as logging
import tensorflow as tf

from core import checkpoints
from core import paths
from estimator import estimator as estimator_lib
from estimator import exporter as exporter_lib
from estimator import training

# contrib's continuous_train_and_eval chunk when neither it nor train_steps is given;
# with train_steps it trains a tenth of them per chunk.
_DEFAULT_TRAIN_STEPS_PER_ITERATION = 1000

# contrib's default check_interval_secs. It throttled contrib's polling for a new
# checkpoint during training; local train_and_evaluate here trains in chunks and
# does not poll, so the argument has no effect.
_CONTRIB_CHECK_INTERVAL_SECS = 5

# delay_workers_by_global_step: worker i waits for this many global steps times ln(i + 1).
_WORKER_WAIT_STEPS_SCALE = 8000.0


def _warn_no_effect(check_interval_secs):
  """Logs one warning when an argument that cannot apply here is set."""
  if check_interval_secs != _CONTRIB_CHECK_INTERVAL_SECS:
    logging.warning('Experiment: check_interval_secs=%r has no effect in slimtrain (training '
                    'is not polled for new checkpoints); it is accepted and ignored',
                    check_interval_secs)


def _worker_wait_steps(task_id):
  """Global step worker `task_id` waits for with delay_workers_by_global_step (contrib's)."""
  return int(_WORKER_WAIT_STEPS_SCALE * math.log((task_id or 0) + 1))


def _is_distributed(config):
  """Whether TF_CONFIG makes this process one task of a cluster."""
  cluster = getattr(config, 'cluster', None)
  if cluster is not None and hasattr(cluster, 'is_distributed'):
    return bool(cluster.is_distributed) or config.task_type == 'evaluator'
  spec = config.cluster_spec
  return bool(spec and spec.as_dict()) or config.task_type == 'evaluator'


def _as_exporters(export_strategies):
  """Returns export_strategies as a list of Exporters.

  Raises:
    ValueError: for anything that is not an Exporter (e.g. a contrib
      ExportStrategy), naming it.
  """
  if export_strategies is None:
    return []
  if isinstance(export_strategies, exporter_lib.Exporter):
    export_strategies = [export_strategies]
  exporters = list(export_strategies)
  for exporter in exporters:
    if not isinstance(exporter, exporter_lib.Exporter):
      raise ValueError('export_strategies must be tfe exporters (FinalExporter, '
                       'LatestExporter, BestExporter), which replace contrib\'s '
                       'ExportStrategy; got %r' % (exporter,))
  return exporters


class Experiment(object):
  """Trains and evaluates an estimator; see the module docstring."""

  def __init__(self, estimator, train_input_fn, eval_input_fn, eval_metrics=None,
               train_steps=None, eval_steps=100, train_monitors=None, eval_hooks=None,
               local_eval_frequency=None, eval_delay_secs=120, continuous_eval_throttle_secs=60,
               min_eval_frequency=None, delay_workers_by_global_step=False,
               export_strategies=None, train_steps_per_iteration=None,
               checkpoint_and_export=False, saving_listeners=None, check_interval_secs=5):
    """Creates an Experiment (contrib's arguments, in contrib's order).

    Args:
      estimator: a tfe.Estimator.
      train_input_fn: input_fn for training.
      eval_input_fn: input_fn for evaluation.
      eval_metrics: contrib's metric dict; must be None, as contrib required
        with a tf.estimator Estimator (return eval_metric_ops from the
        model_fn).
      train_steps: train until this global step (None: until the input ends).
      eval_steps: batches per evaluation (None: the whole eval input).
      train_monitors: SessionRunHooks for training (contrib's monitors).
      eval_hooks: SessionRunHooks for evaluation.
      local_eval_frequency: the `local_run` schedule evaluates every this
        many steps (None: only after training).
      eval_delay_secs: an evaluator task's wait before its first evaluation.
      continuous_eval_throttle_secs: minimum seconds between evaluations of
        continuous_eval (and on a cluster, of train_and_evaluate).
      min_eval_frequency: local train_and_evaluate evaluates every this many
        steps; None: every new checkpoint; 0: only after training.
      delay_workers_by_global_step: a TF_CONFIG worker with index i waits for
        global step int(8000 * ln(i + 1)) (at most train_steps) instead of a
        few seconds.
      export_strategies: an Exporter or a list of them.
      train_steps_per_iteration: steps between the evaluations of
        continuous_train_and_eval (default: train_steps / 10, or 1000).
      checkpoint_and_export: with a checkpoint cadence in the RunConfig,
        train_and_evaluate evaluates and exports at every checkpoint and
        min_eval_frequency is ignored.
      saving_listeners: CheckpointSaverListeners for training.
      check_interval_secs: accepted; has no effect here (a warning says so
        when it is not contrib's default, 5).

    Raises:
      ValueError, TypeError: for invalid arguments, each naming its argument.
    """
    if not isinstance(estimator, estimator_lib.Estimator):
      raise TypeError('Experiment: estimator must be a tfe.Estimator, got %s'
                      % type(estimator).__name__)
    for name, fn in (('train_input_fn', train_input_fn), ('eval_input_fn', eval_input_fn)):
      if not callable(fn):
        raise TypeError('Experiment: %s must be callable, got %r' % (name, fn))
    if eval_metrics is not None:
      raise ValueError('Experiment: eval_metrics is not supported (contrib required None with '
                       'a tf.estimator Estimator too); return eval_metric_ops from the '
                       'model_fn instead')
    for name, value in (('train_steps', train_steps), ('eval_steps', eval_steps),
                        ('train_steps_per_iteration', train_steps_per_iteration)):
      if value is not None and value <= 0:
        raise ValueError('Experiment: %s must be None or > 0, got %r' % (name, value))
    for name, value in (('min_eval_frequency', min_eval_frequency),
                        ('local_eval_frequency', local_eval_frequency)):
      if value is not None and value < 0:
        raise ValueError('Experiment: %s must be None or >= 0, got %r' % (name, value))
    if train_steps_per_iteration is not None and not isinstance(train_steps_per_iteration, int):
      raise ValueError('Experiment: train_steps_per_iteration must be an integer, got %r'
                       % (train_steps_per_iteration,))
    self._estimator = estimator
    self._train_input_fn = train_input_fn
    self._eval_input_fn = eval_input_fn
    self._train_steps = train_steps
    self._eval_steps = eval_steps
    self._train_monitors = list(train_monitors or [])
    self._eval_hooks = list(eval_hooks or [])
    self._eval_delay_secs = eval_delay_secs
    self._continuous_eval_throttle_secs = continuous_eval_throttle_secs
    self._min_eval_frequency = min_eval_frequency
    self._export_strategies = _as_exporters(export_strategies)
    self._train_steps_per_iteration = train_steps_per_iteration
    self._saving_listeners = list(saving_listeners or [])
    self._local_eval_frequency = local_eval_frequency
    self._delay_workers_by_global_step = delay_workers_by_global_step
    self._checkpoint_and_export = checkpoint_and_export
    _warn_no_effect(check_interval_secs)

  @property
  def estimator(self):
    return self._estimator

  @property
  def eval_metrics(self):
    return None

  @property
  def train_steps(self):
    return self._train_steps

  @property
  def eval_steps(self):
    return self._eval_steps

  def extend_train_hooks(self, additional_hooks):
    """Adds SessionRunHooks to the training hooks."""
    self._train_monitors.extend(additional_hooks)

  def reset_export_strategies(self, new_export_strategies=None):
    """Replaces the exporters; returns the previous list."""
    old = self._export_strategies
    self._export_strategies = _as_exporters(new_export_strategies)
    return old

  # -- specs for tfe.train_and_evaluate ------------------------------------

  def _specs(self, throttle_secs, extra_train_hooks=()):
    train_spec = training.TrainSpec(self._train_input_fn, max_steps=self._train_steps,
                                    hooks=self._train_monitors + list(extra_train_hooks),
                                    saving_listeners=self._saving_listeners)
    eval_spec = training.EvalSpec(self._eval_input_fn, steps=self._eval_steps,
                                  hooks=self._eval_hooks,
                                  exporters=self._export_strategies or None,
                                  start_delay_secs=self._eval_delay_secs,
                                  throttle_secs=throttle_secs)
    return train_spec, eval_spec

  def _train_and_evaluate_on_task(self):
    """tfe.train_and_evaluate: this TF_CONFIG task's role (or local mode)."""
    train_spec, eval_spec = self._specs(self._continuous_eval_throttle_secs
                                        if _is_distributed(self._estimator.config) else 0)
    return training.train_and_evaluate(self._estimator, train_spec, eval_spec)

  # -- schedules ----------------------------------------------------------

  def train(self, delay_secs=None):
    """Trains to train_steps; on a cluster chief/worker runs that task's role.

    Args:
      delay_secs: seconds to wait first (local mode; on a cluster workers
        wait as tfe.train_and_evaluate does).

    Returns:
      The estimator (local) or train_and_evaluate's result (cluster).
    """
    config = self._estimator.config
    if _is_distributed(config) and config.task_type in ('chief', 'master', 'worker'):
      if config.task_type == 'worker' and self._delay_workers_by_global_step:
        return self._train_worker_after_global_step()
      train_spec, eval_spec = self._specs(self._continuous_eval_throttle_secs)
      if config.task_type == 'master':
        logging.info('Experiment.train on a master task also evaluates (train_and_evaluate)')
      return training.train_and_evaluate(self._estimator, train_spec, eval_spec)
    if delay_secs:
      logging.info('Waiting %d secs before starting training.', delay_secs)
      time.sleep(delay_secs)
    return self._estimator.train(self._train_input_fn, max_steps=self._train_steps,
                                 hooks=self._train_monitors,
                                 saving_listeners=self._saving_listeners or None)

  def _train_worker_after_global_step(self):
    """A worker's train_and_evaluate role, started by global step (delay_workers_by_global_step).

    A GlobalStepWaiterHook takes the place of the few seconds' delay a
    worker otherwise waits, as in contrib.
    """
    config = self._estimator.config
    wait_steps = _worker_wait_steps(config.task_id)
    if self._train_steps is not None:
      # Never wait for a step the training will not reach (contrib's worker hung there).
      wait_steps = min(wait_steps, self._train_steps)
    logging.info('delay_workers_by_global_step: worker %d starts at global step %d',
                 config.task_id, wait_steps)
    train_spec, eval_spec = self._specs(
        self._continuous_eval_throttle_secs,
        extra_train_hooks=[tf.compat.v1.train.GlobalStepWaiterHook(wait_steps)])
    executor = training._TrainingExecutor(self._estimator, train_spec, eval_spec)  # pylint: disable=protected-access
    executor._config = config.replace(experimental_max_worker_delay_secs=0)  # pylint: disable=protected-access
    return executor.run_worker()

  def evaluate(self, delay_secs=None, name=None):
    """Evaluates the latest checkpoint for eval_steps; returns the metrics."""
    if delay_secs:
      logging.info('Waiting %d secs before starting eval.', delay_secs)
      time.sleep(delay_secs)
    return self._estimator.evaluate(self._eval_input_fn, steps=self._eval_steps,
                                    hooks=self._eval_hooks, name=name)

  def _export(self, eval_result, checkpoint_path, is_the_final_export):
    """Runs every exporter; returns the list of their results."""
    results = []
    for exporter in self._export_strategies:
      export_path = paths.join(self._estimator.model_dir, 'export', exporter.name)
      results.append(exporter.export(self._estimator, export_path, checkpoint_path,
                                     eval_result, is_the_final_export))
    return results

  def _global_step(self):
    checkpoint = self._estimator.latest_checkpoint()
    if not checkpoint:
      return 0
    return int(tf.train.load_variable(checkpoint, tf.compat.v1.GraphKeys.GLOBAL_STEP))

  def _train_eval_loop(self, steps_per_iteration, predicate_fn=None):
    """Alternates training chunks with evaluation and export (local mode).

    Args:
      steps_per_iteration: steps per chunk; 0 or None trains to the end first.
      predicate_fn: optional fn(eval_result) -> whether to go on.

    Returns:
      (last eval result, last export results).
    """
    eval_result, export_results = None, []
    while True:
      start = self._global_step()
      target = self._train_steps
      if steps_per_iteration:
        target = start + steps_per_iteration
        if self._train_steps is not None:
          target = min(target, self._train_steps)
      if self._train_steps is None or start < self._train_steps:
        self._estimator.train(self._train_input_fn, max_steps=target,
                              hooks=self._train_monitors,
                              saving_listeners=self._saving_listeners or None)
      step = self._global_step()
      # Training ends at train_steps, or earlier when the input or a hook stops it.
      is_final = ((self._train_steps is not None and step >= self._train_steps) or
                  target is None or step < target)
      eval_result = self._estimator.evaluate(self._eval_input_fn, steps=self._eval_steps,
                                             hooks=self._eval_hooks)
      export_results = self._export(eval_result, self._estimator.latest_checkpoint(),
                                    is_final)
      if is_final:
        break
      if predicate_fn is not None and not _call_predicate(
          predicate_fn, eval_result, self._estimator.latest_checkpoint()):
        logging.info('continuous_eval_predicate_fn stopped the loop at step %d', step)
        break
    return eval_result, export_results

  def train_and_evaluate(self):
    """Trains and evaluates (see the module docstring); returns (metrics, exports).

    With checkpoint_and_export and a checkpoint cadence in the RunConfig,
    every checkpoint is evaluated and exported (min_eval_frequency ignored).
    """
    config = self._estimator.config
    every_checkpoint = self._checkpoint_and_export and (
        config.save_checkpoints_steps or config.save_checkpoints_secs)
    if (_is_distributed(config) or self._min_eval_frequency is None or every_checkpoint):
      return self._train_and_evaluate_on_task()
    return self._train_eval_loop(self._min_eval_frequency)

  def local_run(self):
    """contrib's oldest schedule: train_and_evaluate every local_eval_frequency steps.

    local_eval_frequency None (its default) evaluates once, after training.
    """
    if _is_distributed(self._estimator.config):
      return self.train_and_evaluate()
    return self._train_eval_loop(self._local_eval_frequency or 0)

  def continuous_train_and_eval(self, continuous_eval_predicate_fn=None):
    """Alternates train_steps_per_iteration training steps with an evaluation.

    Args:
      continuous_eval_predicate_fn: optional fn(eval_result) -> bool; False
        ends the loop.

    Returns:
      (last eval result, last export results).
    """
    if _is_distributed(self._estimator.config):
      raise ValueError('continuous_train_and_eval runs in one process only; on a cluster use '
                       'the train_and_evaluate schedule')
    steps = self._train_steps_per_iteration
    if steps is None:
      steps = (max(1, self._train_steps // 10) if self._train_steps
               else _DEFAULT_TRAIN_STEPS_PER_ITERATION)
    return self._train_eval_loop(steps, continuous_eval_predicate_fn)

  def continuous_eval(self, delay_secs=None, throttle_delay_secs=None,
                      evaluate_checkpoint_only_if_changed=True,
                      continuous_eval_predicate_fn=None, export=True, timeout_secs=None,
                      evaluate_checkpoint_only_once=None):
    """Evaluates each new checkpoint of model_dir (and exports it).

    Returns once a checkpoint reaches train_steps or the predicate says
    stop, or after `timeout_secs` without a new checkpoint.

    Args:
      delay_secs: wait before the first evaluation (default eval_delay_secs
        on a cluster, 0 locally).
      throttle_delay_secs: minimum seconds between evaluations (default
        continuous_eval_throttle_secs).
      evaluate_checkpoint_only_if_changed: must be True (each checkpoint is
        evaluated once).
      continuous_eval_predicate_fn: optional fn(eval_result) -> bool; False stops.
      export: run the exporters after each evaluation.
      timeout_secs: give up after this many seconds without a new checkpoint.
      evaluate_checkpoint_only_once: contrib's name for
        evaluate_checkpoint_only_if_changed (wins when given).

    Returns:
      (last eval result, last export results).
    """
    if evaluate_checkpoint_only_once is not None:
      evaluate_checkpoint_only_if_changed = evaluate_checkpoint_only_once
    if not evaluate_checkpoint_only_if_changed:
      raise ValueError('continuous_eval: evaluate_checkpoint_only_if_changed=False is not '
                       'supported; each checkpoint is evaluated once')
    if delay_secs is None:
      delay_secs = self._eval_delay_secs if _is_distributed(self._estimator.config) else 0
    if throttle_delay_secs is None:
      throttle_delay_secs = self._continuous_eval_throttle_secs
    if delay_secs:
      logging.info('Waiting %d secs before starting eval.', delay_secs)
      time.sleep(delay_secs)
    export_results = []

    def evaluate(checkpoint):
      return self._estimator.evaluate(self._eval_input_fn, steps=self._eval_steps,
                                      hooks=self._eval_hooks, checkpoint_path=checkpoint)

    def export_then_decide(checkpoint, eval_result, unused_count):
      step = eval_result.get('global_step', 0)
      is_final = self._train_steps is not None and step >= self._train_steps
      if export:
        export_results[:] = self._export(eval_result, checkpoint, is_final)
      if is_final:
        logging.info('continuous_eval: step %d reached train_steps=%d; done', step,
                     self._train_steps)
        return 'final_checkpoint'
      if continuous_eval_predicate_fn is not None and not _call_predicate(
          continuous_eval_predicate_fn, eval_result, checkpoint):
        logging.info('continuous_eval_predicate_fn stopped evaluation at step %d', step)
        return 'predicate'
      return None

    outcome = checkpoints.follow_checkpoints(
        self._estimator.model_dir, evaluate, min_interval_secs=throttle_delay_secs,
        timeout=timeout_secs, stop_fn=export_then_decide)
    return outcome.result, export_results

  def run_std_server(self):
    """A ps task: serves variables until the chief reports training over."""
    config = self._estimator.config
    if not _is_distributed(config) or config.task_type != 'ps':
      raise ValueError('run_std_server is the schedule of a TF_CONFIG ps task; this task is '
                       '%r' % (config.task_type,))
    return self._train_and_evaluate_on_task()

  def test(self):
    """One training step and one evaluation step, to check the setup."""
    self._estimator.train(self._train_input_fn, steps=1, hooks=self._train_monitors)
    return self._estimator.evaluate(self._eval_input_fn, steps=1, hooks=self._eval_hooks,
                                    name='one_pass')


def _call_predicate(predicate_fn, eval_result, checkpoint_path):
  """Calls predicate_fn(eval_result[, checkpoint_path]) as its arity allows."""
  try:
    num_args = len(inspect.signature(predicate_fn).parameters)
  except (TypeError, ValueError):
    num_args = 1
  if num_args >= 2:
    return predicate_fn(eval_result, checkpoint_path=checkpoint_path)
  return predicate_fn(eval_result)
