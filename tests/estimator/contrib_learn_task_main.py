"""One task of a tf.contrib.learn job with `delay_workers_by_global_step=True`.

Run by test_contrib_learn_cluster, one process per TF_CONFIG task. The
script is a contrib program with its imports changed: an `experiment_fn`
builds an Experiment and `learn_runner.run` picks each task's schedule from
TF_CONFIG (chief: train_and_evaluate, worker: train, ps: run_std_server).
Each task prints `RESULT <json>` with the training steps it ran itself.
"""

import argparse
import json
import sys

import numpy as np
import tensorflow as tf

from trainer import estimator as tfe
from estimator import learn

tf.compat.v1.disable_eager_execution()


class _CountSteps(tf.compat.v1.train.SessionRunHook):
  """Counts the training steps this process runs."""

  def __init__(self):
    self.steps = 0

  def after_run(self, run_context, run_values):
    self.steps += 1


def _input_fn():
  x = np.random.RandomState(0).uniform(-1, 1, [64, 2]).astype(np.float32)
  y = x.dot(np.array([[1.0], [-1.0]], np.float32))
  return tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(16)


def model_fn(features, labels, mode, params):
  weights = tf.compat.v1.get_variable('w', [2, 1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weights)
  if mode == learn.ModeKeys.INFER:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.reduce_mean(tf.square(predictions - labels))
  train_op = tf.compat.v1.train.GradientDescentOptimizer(params['learning_rate']).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
  parser = argparse.ArgumentParser()
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--train_steps', type=int, default=60)
  args = parser.parse_args(argv)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
  counter = _CountSteps()

  def experiment_fn(run_config, params):
    estimator = tfe.Estimator(model_fn, config=run_config, params=params.values())
    return tfe.Experiment(estimator, _input_fn, _input_fn, train_steps=params.train_steps,
                          eval_steps=1, train_monitors=[counter],
                          delay_workers_by_global_step=True)

  config = learn.RunConfig(model_dir=args.model_dir, save_checkpoints_steps=20)
  learn_runner_hparams = tfe.HParams(learning_rate=0.1, train_steps=args.train_steps)
  tfe.learn_runner.run(experiment_fn, run_config=config, hparams=learn_runner_hparams)
  print('RESULT ' + json.dumps({'task_type': config.task_type, 'task_id': config.task_id,
                                'steps': counter.steps}), flush=True)


if __name__ == '__main__':
  main(sys.argv[1:])
