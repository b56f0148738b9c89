r"""Trains and evaluates a detector with the estimator workflow (OD `model_main.py`).

    python -m trainer.model_main --pipeline_config_path=configs/ssd_shapes.config \
        --model_dir=/tmp/model --num_train_steps=1000

trains to `--num_train_steps` (default: train_config.num_steps), evaluates
new checkpoints on the first eval input (`model_dir/eval_0/`) and exports the
final model to `model_dir/export/Servo/<timestamp>/`. TF_CONFIG (chief,
worker, ps, evaluator) makes it one task of a distributed job, as
`tfe.train_and_evaluate` does.

The evaluator task starts with the others, usually before `model_dir` exists;
it waits for training's first checkpoint (at most `--eval_timeout` seconds
when given, then it exits 0 having evaluated nothing) and evaluates each new
one until the last training step.

Eval-only mode: with `--checkpoint_dir` the checkpoints there are evaluated
(metrics written under `--model_dir`): the latest once with `--run_once`,
otherwise each new one until training reaches its last step.
`--eval_training_data` evaluates on the train input instead (1 of every
`--sample_1_of_n_eval_on_train_examples`). `--num_eval_steps` (the 2018 flag)
evaluates that many batches instead of the whole eval set.

Cluster faults (a chief, worker or ps of a cluster with ps tasks): a ps
killed and restarted makes the training tasks rebuild their session; after
SIGTERM the chief checkpoints the step reached and every task exits 143; a ps
lost past `deploy_config.recovery_timeout_secs` makes them exit 129. The
pipeline's `deploy_config.recovery_timeout_secs`, `termination_grace_secs` and
`chief_timeout_secs` become the RunConfig's (RunConfig defaults: 300, 25 and
300 s). See
docs/fault_tolerance.md.

Start and failures: the chief first checks that it can create and delete a
file in `--model_dir` and exits 1 naming the path, its uid and the fix when it
cannot. An uncaught failure exits by its class (deployment/exit_codes.py): 129
for one known to pass (tf.errors Unavailable/DeadlineExceeded/Aborted, a
storage EIO/ETIMEDOUT/ECONNRESET, a GPU that failed to initialise), 1 for
the rest (a bad config or flag, a missing file, a NaN loss).
"""

from absl import app
from absl import flags
from core import logs as logging
import tensorflow as tf

from deployment import exit_codes
from deployment import fault_tolerance
from deployment import startup_checks
import estimator as tfe
from estimator import faults
from trainer import model_lib

FLAGS = flags.FLAGS


_FLAGS = (
    ('string', 'model_dir', None, 'Where checkpoints, event files and exports go.'),
    ('string', 'pipeline_config_path', None, 'Path to a pipeline config file.'),
    ('integer', 'num_train_steps', None, 'Training steps (default: train_config.num_steps).'),
    ('integer', 'num_eval_steps', None, 'Batches per evaluation (the 2018 model_main flag; '
     'default: the whole eval set).'),
    ('boolean', 'eval_training_data', False, 'Eval-only mode: evaluate the training data '
     'instead of the eval data.'),
    ('integer', 'sample_1_of_n_eval_examples', 1, 'Evaluate 1 of every n eval examples.'),
    ('integer', 'sample_1_of_n_eval_on_train_examples', 5, 'Evaluate 1 of every n training '
     'examples (with --eval_training_data).'),
    ('string', 'hparams_overrides', None, 'Model hparams overrides, e.g. '
     '"load_pretrained=false".'),
    ('string', 'checkpoint_dir', None, 'Eval-only mode: evaluate the checkpoints of this '
     'directory; metrics go to --model_dir.'),
    ('boolean', 'run_once', False, 'Eval-only mode: evaluate the latest checkpoint once and '
     'exit.'),
    ('integer', 'eval_interval_secs', 180, 'Eval-only mode: minimum seconds between '
     'checkpoints looked at.'),
    ('integer', 'eval_timeout', None, 'Eval-only mode: stop after this many seconds without '
     'a new checkpoint (default: wait for the last training step). The evaluator task of a '
     'cluster: wait at most this long for training\'s first checkpoint (default: no limit).'),
)


def define_flags():
  """Defines the OD API's model_main flags; ones already defined are kept."""
  for kind, name, default, help_text in _FLAGS:
    if name not in FLAGS:
      getattr(flags, 'DEFINE_' + kind)(name, default, help_text)


def _check_flags():
  """Raises app.UsageError naming a missing or inconsistent flag."""
  for name in ('model_dir', 'pipeline_config_path'):
    if not FLAGS[name].value:
      raise app.UsageError('--%s is required' % name)
  if FLAGS['run_once'].value and not FLAGS['checkpoint_dir'].value:
    raise app.UsageError('--run_once needs --checkpoint_dir (eval-only mode)')


def _evaluate_only(train_and_eval_dict):
  """Eval-only mode: the latest checkpoint once, or each new one."""
  estimator = train_and_eval_dict['estimator']
  if FLAGS.eval_training_data:
    name, input_fn = 'training_data', train_and_eval_dict['eval_on_train_input_fn']
  else:
    name, input_fn = 'validation_data', train_and_eval_dict['eval_input_fns'][0]
  if FLAGS.run_once:
    checkpoint = tf.train.latest_checkpoint(FLAGS.checkpoint_dir)
    if checkpoint is None:
      raise ValueError('--checkpoint_dir=%s holds no checkpoint to evaluate'
                       % FLAGS.checkpoint_dir)
    return estimator.evaluate(input_fn, steps=FLAGS.num_eval_steps, checkpoint_path=checkpoint,
                              name=name)
  return model_lib.continuous_eval(estimator=estimator, model_dir=FLAGS.checkpoint_dir,
                                   input_fn=input_fn, eval_steps=FLAGS.num_eval_steps,
                                   train_steps=train_and_eval_dict['train_steps'], name=name,
                                   min_interval_secs=FLAGS.eval_interval_secs,
                                   timeout=FLAGS.eval_timeout)


def _first_checkpoint_within(model_dir, timeout):
  """Evaluator task: whether training wrote a checkpoint in `model_dir` within `timeout` s.

  Every pod of a Kubernetes job starts at once, so the evaluator usually
  starts before the chief created model_dir. Without a timeout it does not
  wait here: the Estimator's evaluator waits for checkpoints without limit.
  """
  if tf.train.latest_checkpoint(model_dir):
    return True
  logging.info('evaluator: waiting %s for training to write its first checkpoint in %s',
               'up to %d s' % timeout if timeout else 'without a time limit', model_dir)
  if not timeout:
    return True
  if next(tf.compat.v1.train.checkpoints_iterator(model_dir, timeout=timeout), None):
    return True
  logging.warning('evaluator: no checkpoint in %s within --eval_timeout=%d s; evaluated '
                  'nothing', model_dir, timeout)
  return False


def main(unused_argv):
  _check_flags()
  tf.compat.v1.disable_eager_execution()
  config = tfe.RunConfig(model_dir=FLAGS.model_dir)
  if config.is_chief and not FLAGS.checkpoint_dir and config.task_type != 'evaluator':
    try:  # Before the graph is built: fail in seconds, not at the first save.
      startup_checks.check_writable(FLAGS.model_dir, '--model_dir')
    except startup_checks.NotWritableError as e:
      logging.error('%s', e)
      fault_tolerance.exit_process(exit_codes.PERMANENT)
  train_and_eval_dict = model_lib.create_estimator_and_inputs(
      run_config=config,
      hparams=model_lib.create_hparams(FLAGS.hparams_overrides),
      pipeline_config_path=FLAGS.pipeline_config_path,
      train_steps=FLAGS.num_train_steps,
      sample_1_of_n_eval_examples=FLAGS.sample_1_of_n_eval_examples,
      sample_1_of_n_eval_on_train_examples=FLAGS.sample_1_of_n_eval_on_train_examples,
      save_final_config=True)
  if FLAGS.checkpoint_dir:
    metrics = _evaluate_only(train_and_eval_dict)
    logging.info('Eval-only results: %s', metrics)
    return
  if config.task_type == 'evaluator' and not _first_checkpoint_within(
      config.model_dir, FLAGS.eval_timeout):
    return
  train_spec, eval_specs = model_lib.create_train_and_eval_specs(
      train_and_eval_dict['train_input_fn'],
      train_and_eval_dict['eval_input_fns'],
      train_and_eval_dict['eval_on_train_input_fn'],
      train_and_eval_dict['predict_input_fn'],
      train_and_eval_dict['train_steps'],
      eval_on_train_data=False)
  # Only the first eval spec runs, as in the OD API.
  eval_spec = eval_specs[0]
  if FLAGS.num_eval_steps:
    eval_spec = eval_spec._replace(steps=FLAGS.num_eval_steps)
  try:
    tfe.train_and_evaluate(train_and_eval_dict['estimator'], train_spec, eval_spec)
  except (faults.TrainingPreempted, faults.TaskFailed) as e:
    # 143 / 129; os._exit when a session close was left running in a thread.
    logging.warning('%s', e)
    fault_tolerance.exit_process(e.code)
  if config.cluster.is_distributed:
    fault_tolerance.exit_process(0)


if __name__ == '__main__':
  define_flags()
  app.run(exit_codes.main_with_exit_codes(main, 'trainer.model_main'))
