"""One task of a distributed `tfe.train_and_evaluate` job (run by test_distributed_estimator).

Every task runs the same script; TF_CONFIG says whether it is the chief, a
worker, a ps or the evaluator, exactly as with tf.estimator:

    TF_CONFIG=... python -m tests.estimator.distributed_task_main --model_dir=D

Training has a huge `max_steps`; it ends only by early stopping, which the
chief triggers once the evaluator has evaluated a checkpoint of step
>= --stop_after_step. The worker stops because it polls the STOP variable on
the ps; the evaluator exits after the checkpoint that carries STOP; the ps
exits when the chief says training is over. Prints `RESULT <json>` at the end.
"""

import argparse
import json
import os
import sys

from absl import logging
import tensorflow as tf

from tests.estimator import mnist_testlib
from trainer import estimator as tfe
from estimator import early_stopping

tf.compat.v1.disable_eager_execution()

MAX_STEPS = 100000


def main(argv):
  parser = argparse.ArgumentParser()
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--stop_after_step', type=int, default=20)
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  # Saving by time, and keeping a few, lets the evaluator (slower than this
  # tiny model trains) find each newest checkpoint still on disk.
  config = tfe.RunConfig(save_checkpoints_secs=2, keep_checkpoint_max=5,
                         log_step_count_steps=50, tf_random_seed=1)
  estimator = tfe.Estimator(mnist_testlib.model_fn, model_dir=args.model_dir, config=config,
                            params={'learning_rate': 0.05})

  def evaluated_late_enough():
    evals = early_stopping.read_eval_metrics(estimator.eval_dir())
    return any(step >= args.stop_after_step for step in evals)

  stop_hook = tfe.experimental.make_early_stopping_hook(
      estimator, evaluated_late_enough, run_every_secs=None, run_every_steps=1)
  train_spec = tfe.TrainSpec(mnist_testlib.train_input_fn(batch_size=16), max_steps=MAX_STEPS,
                             hooks=[stop_hook])
  eval_spec = tfe.EvalSpec(
      mnist_testlib.eval_input_fn(), steps=None, start_delay_secs=0, throttle_secs=1,
      exporters=[tfe.FinalExporter('final', mnist_testlib.serving_input_receiver_fn)])
  metrics, export_results = tfe.train_and_evaluate(estimator, train_spec, eval_spec)

  latest = estimator.latest_checkpoint()
  result = {
      'task_type': config.task_type,
      'global_step': None if metrics is None else int(metrics['global_step']),
      'exports': [e.decode() if isinstance(e, bytes) else e for e in export_results or []],
      'latest_checkpoint': latest,
      'stop_flag': bool(latest) and early_stopping.checkpoint_requested_stop(latest),
  }
  print('RESULT %s' % json.dumps(result), flush=True)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main(sys.argv[1:]))
