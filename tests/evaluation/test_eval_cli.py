"""`python -m trainer.eval` in subprocesses: run once, continuous, bad input."""

import os
import shutil
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests import fork_server
from tests.evaluation import eval_testlib

tf.compat.v1.disable_eager_execution()

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAP50 = 'DetectionBoxes_Precision/mAP@.50IOU'


def _run_eval(*flags, timeout=240):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  return fork_server.run([sys.executable, '-m', 'trainer.eval'] + list(flags), cwd=_ROOT,
                        env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
  """(config path, checkpoint dir) of an untrained SSD saved at num_steps (3)."""
  directory = str(tmp_path_factory.mktemp('cli'))
  configs, _ = eval_testlib.shapes_configs(directory, num_train=1, num_val=3, num_steps=3)
  config_path = eval_testlib.write_config(configs, os.path.join(directory, 'config'))
  checkpoint_dir = os.path.join(directory, 'train')
  eval_testlib.save_initial_checkpoint(configs['model'],
                                       os.path.join(checkpoint_dir, 'model.ckpt'), global_step=3)
  return config_path, checkpoint_dir


def test_run_once_writes_metrics_and_the_config(setup, tmp_path):
  config_path, checkpoint_dir = setup
  eval_dir = str(tmp_path / 'eval')
  proc = _run_eval('--pipeline_config_path=' + config_path, '--checkpoint_dir=' + checkpoint_dir,
                   '--eval_dir=' + eval_dir, '--run_once')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'stopped: run_once' in proc.stderr
  events = eval_testlib.read_events(eval_dir)
  assert [step for step, _ in events[MAP50]] == [3]
  assert 0.0 <= events[MAP50][0][1] <= 1.0
  assert os.path.isfile(os.path.join(eval_dir, 'pipeline.config'))


def test_continuous_eval_exits_after_the_final_checkpoint(setup, tmp_path):
  config_path, checkpoint_dir = setup
  proc = _run_eval('--pipeline_config_path=' + config_path, '--checkpoint_dir=' + checkpoint_dir,
                   '--eval_dir=' + str(tmp_path / 'eval'), '--eval_timeout=60')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'step 3 >= num_steps 3' in proc.stderr
  assert 'stopped: final_checkpoint' in proc.stderr


def test_started_before_training_it_waits_for_the_train_dir(setup, tmp_path):
  # All pods of a Kubernetes job start at once: the evaluator's --checkpoint_dir
  # is a train_dir the chief has not created yet.
  config_path, trained_dir = setup
  train_dir = str(tmp_path / 'train')
  log_path = str(tmp_path / 'eval.log')
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  with open(log_path, 'w') as log:
    process = subprocess.Popen(
        [sys.executable, '-m', 'trainer.eval', '--pipeline_config_path=' + config_path,
         '--checkpoint_dir=' + train_dir, '--eval_dir=' + str(tmp_path / 'eval'),
         '--eval_timeout=120'], cwd=_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
  try:
    deadline = time.time() + 120
    while 'does not exist yet' not in _read(log_path):
      assert process.poll() is None and time.time() < deadline, _read(log_path)[-3000:]
      time.sleep(0.1)
    assert ('checkpoint_dir %s does not exist yet: waiting up to 120 s for training to '
            'write its first checkpoint there' % train_dir) in _read(log_path)
    # "Training" writes the final checkpoint (step 3 = num_steps); the state file last.
    os.makedirs(train_dir)
    for name in os.listdir(trained_dir):
      if name.startswith('model.ckpt-3.'):
        shutil.copy(os.path.join(trained_dir, name), train_dir)
    tf.compat.v1.train.update_checkpoint_state(train_dir,
                                               os.path.join(train_dir, 'model.ckpt-3'))
    code = process.wait(timeout=180)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  log = _read(log_path)
  assert code == 0, log[-3000:]
  assert 'evaluations: 1, last step 3, stopped: final_checkpoint' in log


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def test_bad_input_names_the_problem(setup, tmp_path):
  config_path, checkpoint_dir = setup
  eval_dir = '--eval_dir=' + str(tmp_path / 'eval')
  proc = _run_eval('--pipeline_config_path=' + config_path,
                   '--checkpoint_dir=' + str(tmp_path / 'nowhere'), eval_dir, '--run_once')
  assert proc.returncode == 1
  assert ('trainer.eval: error: --checkpoint_dir=%s: no such directory or checkpoint prefix'
          % (tmp_path / 'nowhere')) in proc.stderr

  typo = os.path.join(checkpoint_dir, 'model.ckpt-30')
  proc = _run_eval('--pipeline_config_path=' + config_path, '--checkpoint_dir=' + typo,
                   eval_dir)
  assert proc.returncode == 1
  assert 'trainer.eval: error: --checkpoint_dir=%s: no such checkpoint prefix' % typo in (
      proc.stderr)

  proc = _run_eval('--pipeline_config_path=' + str(tmp_path / 'missing.config'),
                   '--checkpoint_dir=' + checkpoint_dir, eval_dir)
  assert proc.returncode == 1
  assert 'pipeline config file not found: %s' % (tmp_path / 'missing.config') in proc.stderr

  proc = _run_eval('--pipeline_config_path=' + config_path, '--checkpoint_dir=' + checkpoint_dir)
  assert proc.returncode != 0
  assert '--eval_dir is required' in proc.stderr


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
