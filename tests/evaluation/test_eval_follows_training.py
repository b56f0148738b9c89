"""`python -m trainer.eval --num_train_steps=N` follows real training to its last checkpoint.

Two evaluators start first, before the train_dir exists (as the pods of a
Kubernetes job do); `python -m trainer.train` then writes the checkpoint at
step 2 (and one at step 0 when it starts) and exits, and a second trainer
run resumes to step 4, the last (`--num_train_steps=4`, while the config
says 1000). Both evaluators exit 0
after evaluating step 4, which appeared after a chief had exited. The one
with the demo's `max_evals: 1` skips step 2 and evaluates only step 4; the
one without a cap evaluates both.
"""

import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests import fork_server
from tests.evaluation import eval_testlib

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAP50 = 'DetectionBoxes_Precision/mAP@.50IOU'


def _config(directory, max_evals):
  configs, _ = eval_testlib.shapes_configs(directory, num_train=4, num_val=2, num_steps=1000,
                                           batch_size=2)
  configs['deploy_config'].num_clones = 1
  configs['train_config'].save_interval_secs = 3600  # only the final save of each run
  configs['eval_config'].max_evals = max_evals
  configs['eval_config'].num_examples = 2
  configs['eval_config'].num_visualizations = 1
  return eval_testlib.write_config(configs, os.path.join(directory, 'config-%d' % max_evals))


def _start(module, flags, log_path):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  with open(log_path, 'w') as log:
    return fork_server.popen([sys.executable, '-m', module] + flags, cwd=REPO_ROOT, env=env,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def _wait_for(text, log_path, process, timeout=240):
  deadline = time.time() + timeout
  while text not in _read(log_path):
    assert process.poll() is None and time.time() < deadline, _read(log_path)[-4000:]
    time.sleep(0.2)


def _train(config_path, train_dir, steps, log_path):
  process = _start('trainer.train', ['--pipeline_config_path=' + config_path,
                                     '--train_dir=' + train_dir,
                                     '--num_train_steps=%d' % steps], log_path)
  assert process.wait(timeout=300) == 0, _read(log_path)[-4000:]
  latest = tf.train.latest_checkpoint(train_dir)
  assert int(tf.train.load_variable(latest, 'global_step')) == steps


def test_evaluators_follow_training_to_its_last_checkpoint(tmp_path):
  capped_config = _config(str(tmp_path), max_evals=1)
  every_config = _config(str(tmp_path), max_evals=0)
  train_dir = str(tmp_path / 'train')
  logs = {name: str(tmp_path / ('%s.log' % name)) for name in ('capped', 'every', 't2', 't4')}
  evaluators = {
      name: _start('trainer.eval', ['--pipeline_config_path=' + config,
                                    '--checkpoint_dir=' + train_dir,
                                    '--eval_dir=' + str(tmp_path / ('eval-' + name)),
                                    '--num_train_steps=4', '--eval_timeout=300'], logs[name])
      for name, config in (('capped', capped_config), ('every', every_config))}
  try:
    for name, process in evaluators.items():
      _wait_for('does not exist yet', logs[name], process)
    _train(every_config, train_dir, 2, logs['t2'])
    # The chief has exited; the evaluators saw its last checkpoint and wait on.
    _wait_for('evaluated 2 examples of %s/model.ckpt-2' % train_dir, logs['every'],
              evaluators['every'])
    _wait_for('skipping %s/model.ckpt-2 (step 2 < num_steps 4)' % train_dir, logs['capped'],
              evaluators['capped'])
    _train(every_config, train_dir, 4, logs['t4'])
    codes = {name: process.wait(timeout=300) for name, process in evaluators.items()}
  finally:
    for process in evaluators.values():
      if process.poll() is None:
        process.kill()
        process.wait()
  for name in evaluators:
    assert codes[name] == 0, _read(logs[name])[-4000:]
  steps = {name: [step for step, _ in eval_testlib.read_events(
      str(tmp_path / ('eval-' + name)))[MAP50]] for name in evaluators}
  assert steps['capped'] == [4]
  # The chief also saves at step 0 when it starts; the evaluator may see it or not.
  assert steps['every'] in ([2, 4], [0, 2, 4]), steps
  for name in evaluators:
    assert 'evaluations: %d, last step 4, stopped: final_checkpoint' % len(steps[name]) in (
        _read(logs[name])), _read(logs[name])[-4000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
