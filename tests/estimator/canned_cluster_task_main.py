"""One task of a wide-and-deep `tfe.train_and_evaluate` job on a ps cluster (test_canned_cluster).

Every task runs this script; TF_CONFIG says chief, worker or ps:

    TF_CONFIG=... python -m tests.estimator.canned_cluster_task_main --model_dir=D --max_steps=N

The chief and the worker train `canned_testlib.wide_deep_for_cluster`
asynchronously until the global step reaches --max_steps; the ps tasks hold
the variables, the city tables split in two. The chief records where each
variable was placed, evaluates the final checkpoint in its own process and
prints `RESULT <json>`.
"""

import argparse
import json
import os
import sys

import tensorflow as tf

from tests.estimator import canned_testlib as lib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()


class _RecordDevicesAndSteps(tf.compat.v1.train.SessionRunHook):
  """Records {variable op name: device} of the training graph and the steps this task ran."""

  def __init__(self):
    self.devices = {}
    self.steps = 0

  def begin(self):
    for variable in tf.compat.v1.global_variables():
      self.devices[variable.op.name] = variable.device

  def after_run(self, run_context, run_values):
    self.steps += 1


def main(argv):
  parser = argparse.ArgumentParser()
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--max_steps', type=int, default=400)
  args = parser.parse_args(argv)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  config = tfe.RunConfig(tf_random_seed=1, save_summary_steps=1000, log_step_count_steps=100,
                         experimental_max_worker_delay_secs=1)
  estimator = lib.wide_deep_for_cluster(args.model_dir, config)
  features, labels = lib.make_data(1024, seed=0, task='binary')
  eval_features, eval_labels = lib.make_data(512, seed=1, task='binary')
  record = _RecordDevicesAndSteps()
  train_spec = tfe.TrainSpec(lib.train_input_fn(features, labels), max_steps=args.max_steps,
                             hooks=[record])
  eval_spec = tfe.EvalSpec(lib.eval_input_fn(eval_features, eval_labels), steps=None)
  tfe.train_and_evaluate(estimator, train_spec, eval_spec)
  result = {'task_type': config.task_type, 'num_ps_replicas': config.num_ps_replicas,
            'steps': record.steps}
  if config.task_type == 'chief':
    metrics = estimator.evaluate(lib.eval_input_fn(eval_features, eval_labels))
    result.update(devices=record.devices, accuracy=float(metrics['accuracy']),
                  global_step=int(metrics['global_step']))
  print('RESULT %s' % json.dumps(result), flush=True)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main(sys.argv[1:]))
