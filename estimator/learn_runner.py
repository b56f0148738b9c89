"""`learn_runner.run`: build an Experiment and run one schedule of it (tf.contrib.learn).

    import estimator as tfe

    def experiment_fn(run_config, hparams):
      estimator = tfe.Estimator(model_fn, config=run_config, params=hparams.values())
      return tfe.Experiment(estimator, train_input_fn, eval_input_fn, train_steps=1000)

    tfe.learn_runner.run(experiment_fn, run_config=tfe.RunConfig(model_dir='/tmp/m'),
                         hparams=tfe.HParams(learning_rate=0.1))

The schedule is a method name of the Experiment. Without one it follows the
TF_CONFIG task, as contrib did:

    no cluster, chief, master   'train_and_evaluate'
    worker                      'train'
    ps                          'run_std_server'
    evaluator                   'continuous_eval'

experiment_fn gets the run config and the hparams positionally, as from
contrib, so `def experiment_fn(config, params)` works as well. The oldest
form, `run(experiment_fn, output_dir)`, calls `experiment_fn(output_dir=...)`
and is still accepted.
"""

import inspect

from core import logs as logging

from estimator import experiment as experiment_lib
from estimator import run_config as run_config_lib

_DEFAULT_SCHEDULES = {
    'chief': 'train_and_evaluate',
    'master': 'train_and_evaluate',
    'worker': 'train',
    'ps': 'run_std_server',
    'evaluator': 'continuous_eval',
}


def _default_schedule(config):
  """The schedule for this TF_CONFIG task (see the module docstring).

  Raises:
    ValueError: for a task type that has no default schedule.
  """
  if config is None or not experiment_lib._is_distributed(config):  # pylint: disable=protected-access
    return 'train_and_evaluate'
  task_type = config.task_type
  if not task_type:
    raise ValueError('Must specify a schedule: TF_CONFIG names a cluster but no task type')
  if task_type not in _DEFAULT_SCHEDULES:
    raise ValueError('No default schedule for task type: %s' % task_type)
  return _DEFAULT_SCHEDULES[task_type]


def _valid_schedules(experiment):
  return sorted(name for name in dir(experiment)
                if not name.startswith('_') and callable(getattr(experiment, name)) and
                name not in ('extend_train_hooks', 'reset_export_strategies'))


def _execute_schedule(experiment, schedule):
  """Calls experiment.<schedule>() and returns its result.

  Raises:
    ValueError: for a schedule that is not a method of the experiment.
    TypeError: for a member that is not callable.
  """
  if not isinstance(schedule, str) or not hasattr(experiment, schedule) or \
      schedule.startswith('_'):
    valid = _valid_schedules(experiment)
    logging.error('Schedule references non-existent task %s; allowed values for this '
                  'experiment are: %s', schedule, valid)
    raise ValueError('Schedule references non-existent task %s (allowed schedules: %s)'
                     % (schedule, ', '.join(valid)))
  task = getattr(experiment, schedule)
  if not callable(task):
    raise TypeError('Schedule references non-callable member %s' % schedule)
  return task()


def _call_old_form(experiment_fn, output_dir):
  """contrib's deprecated form: `experiment_fn(output_dir=...)`.

  contrib passed output_dir by keyword; a one-argument function that names its
  parameter otherwise gets it positionally.
  """
  try:
    params = inspect.signature(experiment_fn).parameters
  except (TypeError, ValueError):
    params = {}
  takes_keyword = 'output_dir' in params or any(
      p.kind == p.VAR_KEYWORD for p in params.values())
  if params and not takes_keyword:
    return experiment_fn(output_dir)
  return experiment_fn(output_dir=output_dir)


def run(experiment_fn, output_dir=None, schedule=None, run_config=None, hparams=None):
  """Builds the Experiment with `experiment_fn` and runs `schedule` on it.

  Args:
    experiment_fn: `fn(run_config, hparams) -> Experiment`, called with
      both positionally (the parameters may have any names), or (with
      output_dir) the old `fn(output_dir) -> Experiment`.
    output_dir: old form only: the model directory passed to experiment_fn.
    schedule: an Experiment method name; None picks one from TF_CONFIG.
    run_config: a tfe.RunConfig (new form); None builds `RunConfig()`.
    hparams: an HParams (or anything) passed on to experiment_fn.

  Returns:
    What the schedule returns (e.g. (metrics, export_results) for
    train_and_evaluate).

  Raises:
    TypeError: if experiment_fn is not callable or returns no Experiment.
    ValueError: for an unknown schedule or conflicting arguments.
  """
  if not callable(experiment_fn):
    raise TypeError('Experiment builder "%s" is not callable.' % (experiment_fn,))
  if output_dir is not None:
    if run_config is not None or hparams is not None:
      raise ValueError('Cannot provide both `output_dir` and either `run_config` or '
                       '`hparams`; pass the directory as run_config.model_dir instead.')
    experiment = _call_old_form(experiment_fn, output_dir)
  else:
    if run_config is None:
      run_config = run_config_lib.RunConfig()
    # Positionally, as contrib did: `def experiment_fn(config, params)` works too.
    experiment = experiment_fn(run_config, hparams)
  if not isinstance(experiment, experiment_lib.Experiment):
    raise TypeError('Experiment builder did not return an Experiment instance, got %s '
                    'instead.' % type(experiment))
  if schedule is None:
    schedule = _default_schedule(experiment.estimator.config)
  logging.info('learn_runner: running schedule %s', schedule)
  return _execute_schedule(experiment, schedule)
