"""One task of a `tfe.train_and_evaluate` ps cluster that a fault test hurts.

Every task (chief, worker, ps) runs this script with its own TF_CONFIG:

    TF_CONFIG=... python -m tests.estimator.fault_task_main --model_dir=D \
        --max_steps=2000 --recovery_timeout_secs=15

Each training step sleeps `--step_secs` (a hook), so the global step moves
at a pace the tests can aim a fault at on any machine. The chief logs the
global step of every step (`step = N`). The process ends as a cluster
program should: with the code of the `SystemExit` train_and_evaluate raised
(143 preempted, 129 retryable), else 0, through
`fault_tolerance.exit_process`.
"""

import argparse
import os
import sys
import time

from absl import logging
import tensorflow as tf

from deployment import fault_tolerance
from tests.estimator import mnist_testlib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()


class _PaceHook(tf.compat.v1.train.SessionRunHook):
  """Sleeps after every step: a slow model without a slow machine."""

  def __init__(self, secs):
    self._secs = secs

  def after_run(self, run_context, run_values):
    time.sleep(self._secs)


class _ReadStepAtEndHook(tf.compat.v1.train.SessionRunHook):
  """When training ends: waits for a file (the test kills the ps first), then reads the step.

  A user hook that runs the session in `end()` after its ps was lost.
  """

  def __init__(self, wait_for_path):
    self._wait_for_path = wait_for_path
    self._global_step = None

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def end(self, session):
    print('END HOOK WAITING', flush=True)
    deadline = time.time() + 120
    while not os.path.exists(self._wait_for_path) and time.time() < deadline:
      time.sleep(0.1)
    session.run(self._global_step)


def main(argv):
  parser = argparse.ArgumentParser()
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--max_steps', type=int, default=2000)
  parser.add_argument('--step_secs', type=float, default=0.02)
  parser.add_argument('--save_checkpoints_secs', type=int, default=2)
  parser.add_argument('--recovery_timeout_secs', type=int, default=300)
  parser.add_argument('--termination_grace_secs', type=int, default=25)
  parser.add_argument('--chief_timeout_secs', type=int, default=300)
  parser.add_argument('--session_creation_timeout_secs', type=int, default=7200)
  parser.add_argument('--end_hook_waits_for', default=None,
                      help='a path: a hook\'s end() waits for it, then reads the global step')
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO)
  tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

  config = tfe.RunConfig(save_checkpoints_secs=args.save_checkpoints_secs,
                         keep_checkpoint_max=3, log_step_count_steps=1, tf_random_seed=1,
                         save_summary_steps=0,
                         recovery_timeout_secs=args.recovery_timeout_secs,
                         session_creation_timeout_secs=args.session_creation_timeout_secs,
                         termination_grace_secs=args.termination_grace_secs,
                         chief_timeout_secs=args.chief_timeout_secs)
  estimator = tfe.Estimator(mnist_testlib.model_fn, model_dir=args.model_dir, config=config,
                            params={'learning_rate': 0.02})
  train_spec = tfe.TrainSpec(mnist_testlib.train_input_fn(batch_size=16),
                             max_steps=args.max_steps,
                             hooks=[_PaceHook(args.step_secs)] + (
                                 [_ReadStepAtEndHook(args.end_hook_waits_for)]
                                 if args.end_hook_waits_for else []))
  eval_spec = tfe.EvalSpec(mnist_testlib.eval_input_fn(), steps=1, start_delay_secs=0,
                           throttle_secs=3600)
  try:
    tfe.train_and_evaluate(estimator, train_spec, eval_spec)
  except SystemExit as e:
    logging.warning('exiting with code %s: %s', e.code, e)
    return e.code
  logging.info('task %s:%d done', config.task_type, config.task_id)
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  fault_tolerance.exit_process(main(sys.argv[1:]))
