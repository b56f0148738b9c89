"""A user program that trains and evaluates an Estimator, for test_logging_launch_styles.

The test starts it as a separate process in each way a user launches a
TensorFlow program, then counts lines of its stderr:

    python logging_program_main.py STYLE WORKLOAD VERBOSITY MODEL_DIR

STYLE is how `main` gets called: `plain` (directly, as a script with its own
argument parsing), `tf_app` (`tf.compat.v1.app.run(main)`) or `absl_app`
(`absl.app.run(main)`). The fourth style, a notebook-like `python -c`, calls
`main` from the test's own `-c` code (see `run_inline`).

WORKLOAD picks what the program does:

* `estimator`: `Estimator.train` for a few steps, then one `evaluate`;
* `contrib`: a tf.contrib.learn program, shaped like the TF 1 CIFAR-10
  Estimator tutorial: a subclass of contrib's RunConfig, `HParams`, an
  `experiment_fn(run_config, hparams)` returning an Experiment, and
  `learn_runner.run`, whose default schedule trains and evaluates every
  checkpoint.

VERBOSITY `info` calls `tf.compat.v1.logging.set_verbosity(INFO)` first, as
tf.estimator programs did; `default` leaves the verbosity alone.

The program prints nothing itself; the test reads what the library and
TensorFlow log.
"""

import sys

import numpy as np
import tensorflow as tf

import estimator as tfe
from estimator import learn

TRAIN_STEPS = 4
CHECKPOINT_EVERY = 2
EVAL_STEPS = 2


def _input_fn():
  features = np.arange(16, dtype=np.float32).reshape([8, 2]) / 16.0
  labels = features.sum(axis=1, keepdims=True)
  return tf.data.Dataset.from_tensor_slices(({'x': features}, labels)).repeat().batch(4)


def _model_fn(features, labels, mode, params=None):
  weights = tf.compat.v1.get_variable('w', [2, 1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weights)
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.reduce_mean(tf.square(predictions - labels))
  learning_rate = (params or {}).get('learning_rate', 0.1)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})


def _run_estimator(model_dir):
  """Trains for TRAIN_STEPS and evaluates once."""
  estimator = tfe.Estimator(_model_fn, model_dir=model_dir)
  estimator.train(_input_fn, max_steps=TRAIN_STEPS)
  estimator.evaluate(_input_fn, steps=EVAL_STEPS)


class _TutorialRunConfig(learn.RunConfig):
  """A RunConfig subclass, as the CIFAR-10 tutorial kept one to drop keys from `uid`."""

  def uid(self, whitelist=None):
    """A string naming this configuration (the model directory here)."""
    del whitelist  # Unused: only the directory tells these configs apart.
    return 'run_config:%s' % self.model_dir


def _run_contrib(model_dir):
  """learn_runner.run over an experiment_fn, with a checkpoint every CHECKPOINT_EVERY steps."""

  def experiment_fn(run_config, hparams):
    estimator = tfe.Estimator(_model_fn, config=run_config, params=hparams.values())
    return learn.Experiment(estimator, train_input_fn=_input_fn, eval_input_fn=_input_fn,
                            train_steps=TRAIN_STEPS, eval_steps=EVAL_STEPS)

  config = _TutorialRunConfig(model_dir=model_dir, save_checkpoints_steps=CHECKPOINT_EVERY)
  learn.learn_runner.run(experiment_fn, run_config=config,
                         hparams=tfe.HParams(learning_rate=0.1))


def main(argv):
  """Runs WORKLOAD with VERBOSITY into MODEL_DIR (argv[1:], after any style argument)."""
  workload, verbosity, model_dir = argv[1:4]
  if verbosity == 'info':
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  elif verbosity != 'default':
    raise ValueError('VERBOSITY must be info or default, got %r' % verbosity)
  if workload == 'estimator':
    _run_estimator(model_dir)
  elif workload == 'contrib':
    _run_contrib(model_dir)
  else:
    raise ValueError('WORKLOAD must be estimator or contrib, got %r' % workload)


def run_inline(workload, verbosity, model_dir):
  """The `python -c` style: called from the test's inline code, no launcher at all."""
  main(['-c', workload, verbosity, model_dir])


def _launch(argv):
  """Calls `main` the way STYLE (argv[1]) says."""
  style = argv.pop(1)
  if style == 'plain':
    main(argv)
  elif style == 'tf_app':
    tf.compat.v1.app.run(main, argv=argv)
  elif style == 'absl_app':
    from absl import app  # pylint: disable=g-import-not-at-top
    app.run(main, argv=argv)
  else:
    raise ValueError('STYLE must be plain, tf_app or absl_app, got %r' % style)


if __name__ == '__main__':
  _launch(sys.argv)
