"""One task of a `train_and_evaluate` cluster whose training input ends.

The shape of an epoch-based program: each worker trains on a dataset
without `.repeat()`, so its input ends after `--num_batches` steps of its
own, whatever `max_steps` says. Every task runs this script and TF_CONFIG
says its role:

    TF_CONFIG=... python -m tests.estimator.finite_input_task_main --model_dir=D

Prints `RESULT <json>` when `train_and_evaluate` returns.
"""

import argparse
import json
import os
import sys

from absl import logging
import tensorflow as tf

from tests.estimator import mnist_testlib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

BATCH_SIZE = 16


def main(argv):
  parser = argparse.ArgumentParser()
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--num_batches', type=int, default=30)
  parser.add_argument('--max_steps', type=int, default=None)
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  config = tfe.RunConfig(tf_random_seed=1, save_checkpoints_steps=10,
                         log_step_count_steps=None)
  estimator = tfe.Estimator(mnist_testlib.model_fn, model_dir=args.model_dir, config=config,
                            params=dict(mnist_testlib.DEFAULT_PARAMS))
  train_input_fn = mnist_testlib.eval_input_fn(
      batch_size=BATCH_SIZE, num_examples=BATCH_SIZE * args.num_batches,
      seed=10 + config.task_id)
  train_spec = tfe.TrainSpec(train_input_fn, max_steps=args.max_steps)
  eval_spec = tfe.EvalSpec(mnist_testlib.eval_input_fn(), steps=None, start_delay_secs=0,
                           throttle_secs=1)
  metrics, _ = tfe.train_and_evaluate(estimator, train_spec, eval_spec)
  result = {
      'task_type': config.task_type,
      'global_step': None if metrics is None else int(metrics['global_step']),
      'latest_checkpoint': estimator.latest_checkpoint(),
  }
  print('RESULT %s' % json.dumps(result), flush=True)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main(sys.argv[1:]))
