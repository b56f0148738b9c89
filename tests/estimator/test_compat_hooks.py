"""tf.estimator's hooks as `tfe.<Hook>` (issue 26, item 6), used the way user code did.

Each test is a tf.estimator program with `tf.estimator.` replaced by `tfe.`:
hooks handed to `train(hooks=...)`, returned as `training_hooks` /
`evaluation_hooks` from the model_fn, a `CheckpointSaverHook` with
listeners replacing the Estimator's own saver, and a custom
`SessionRunHook` fetching tensors through `SessionRunArgs`.
"""

import glob
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import test_util
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

HOOK_NAMES = ['SessionRunHook', 'SessionRunArgs', 'SessionRunContext', 'SessionRunValues',
              'LoggingTensorHook', 'StopAtStepHook', 'CheckpointSaverHook',
              'CheckpointSaverListener', 'StepCounterHook', 'SummarySaverHook', 'NanTensorHook',
              'FeedFnHook', 'ProfilerHook', 'GlobalStepWaiterHook', 'FinalOpsHook',
              'NanLossDuringTrainingError']


def _input_fn():
  x = np.linspace(-1.0, 1.0, 64, dtype=np.float32).reshape([-1, 1])
  ds = tf.data.Dataset.from_tensor_slices(({'x': x}, 3.0 * x + 1.0))
  return ds.repeat().batch(8)


def model_fn(features, labels, mode, config):
  """A one-weight regression whose hooks come from the model_fn, as users wrote it."""
  weight = tf.compat.v1.get_variable('w', [1, 1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weight)
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  logging_hook = tfe.LoggingTensorHook({'loss': loss}, every_n_iter=5)
  summary_hook = tfe.SummarySaverHook(
      save_steps=5, output_dir=config.model_dir,
      summary_op=tf.compat.v1.summary.scalar('squared_error', loss))
  final_hook = tfe.FinalOpsHook({'w': tf.identity(weight)})
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op,
                           training_hooks=[logging_hook, summary_hook,
                                           tfe.NanTensorHook(loss)],
                           evaluation_hooks=[final_hook])


class RecordingListener(tfe.CheckpointSaverListener):
  """Records the steps it was told about, as a user's export-on-save listener would."""

  def __init__(self):
    self.saved_steps = []

  def after_save(self, session, global_step_value):
    self.saved_steps.append(int(global_step_value))


class LossRecorder(tfe.SessionRunHook):
  """A user's hook: fetches the global step with SessionRunArgs after each step."""

  def __init__(self):
    self.steps = []

  def begin(self):
    self._step = tf.compat.v1.train.get_global_step()

  def before_run(self, run_context):
    assert isinstance(run_context, tfe.SessionRunContext)
    return tfe.SessionRunArgs({'step': self._step})

  def after_run(self, run_context, run_values):
    assert isinstance(run_values, tfe.SessionRunValues)
    self.steps.append(int(run_values.results['step']))


def test_every_hook_name_is_the_tf_compat_v1_class():
  for name in HOOK_NAMES:
    assert getattr(tfe, name) is getattr(tf.compat.v1.train, name), name
    assert 'tfe.' + name in _MIGRATING, name


def test_nan_loss_stops_training_with_the_tf_estimator_error(tmp_path):
  def nan_model_fn(features, labels, mode):
    del labels
    loss = tf.reduce_mean(features['x']) * np.nan + tf.compat.v1.get_variable('w', [])
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)

  est = tfe.Estimator(nan_model_fn, model_dir=str(tmp_path))
  with pytest.raises(tfe.NanLossDuringTrainingError):
    est.train(_input_fn, steps=3)


def test_user_checkpoint_saver_hook_with_listener_replaces_the_default(tmp_path):
  model_dir = str(tmp_path / 'model')
  config = tfe.RunConfig(session_config=test_util.session_config(num_cpus=1),
                         save_checkpoints_secs=None, save_checkpoints_steps=None,
                         log_step_count_steps=None)
  est = tfe.Estimator(model_fn, model_dir=model_dir, config=config)
  listener = RecordingListener()
  recorder = LossRecorder()
  hooks = [tfe.CheckpointSaverHook(model_dir, save_steps=5, listeners=[listener]),
           tfe.StopAtStepHook(last_step=10), recorder,
           tfe.StepCounterHook(every_n_steps=5, output_dir=model_dir),
           tfe.GlobalStepWaiterHook(wait_until_step=0),
           tfe.ProfilerHook(save_steps=5, output_dir=str(tmp_path / 'profile')),
           tfe.FeedFnHook(lambda: {})]
  est.train(_input_fn, hooks=hooks)
  assert est.get_variable_value('global_step') == 10
  assert 5 in listener.saved_steps and listener.saved_steps[-1] == 10
  assert os.path.exists(os.path.join(model_dir, 'model.ckpt-5.index'))
  # The step is read in the same run as the train op that increments it, so each of the
  # 10 runs sees the step before or after its own increment (TF orders neither first).
  assert len(recorder.steps) == 10, recorder.steps
  assert all(s in (i, i + 1) for i, s in enumerate(recorder.steps)), recorder.steps
  assert glob.glob(str(tmp_path / 'profile' / 'timeline-*.json'))
  tags = {value.tag for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*'))
          for event in tf.compat.v1.train.summary_iterator(path)
          for value in event.summary.value}
  assert {'squared_error', 'global_step/sec'} <= tags


def test_saving_listeners_go_to_the_users_saver_hook(tmp_path):
  model_dir = str(tmp_path / 'model')
  est = tfe.Estimator(model_fn, model_dir=model_dir, config=tfe.RunConfig(
      session_config=test_util.session_config(num_cpus=1), save_checkpoints_steps=100))
  listener = RecordingListener()
  est.train(_input_fn, steps=6, saving_listeners=[listener],
            hooks=[tfe.CheckpointSaverHook(model_dir, save_steps=3)])
  assert listener.saved_steps[-1] == 6 and 3 in listener.saved_steps



@pytest.mark.parametrize('task_type,task_id,expect_hooks', [
    ('worker', 0, True), ('worker', 1, False), ('master', 0, False)])
def test_worker_zero_writes_summaries_when_a_master_evaluates(
    monkeypatch, task_type, task_id, expect_hooks):
  # The Estimator's own choice (estimator/util.py summary_duty): beside a
  # master, only worker 0 gets the summary and step-rate hooks, and the
  # chief's session writes none.
  from estimator import util
  cluster = {'master': ['localhost:1'], 'worker': ['localhost:2', 'localhost:3']}
  monkeypatch.setenv('TF_CONFIG', json.dumps(
      {'cluster': cluster, 'task': {'type': task_type, 'index': task_id}}))
  config = tfe.RunConfig(save_summary_steps=7, log_step_count_steps=9)
  with tf.Graph().as_default():
    loss = tf.constant(1.0)
    spec = tfe.EstimatorSpec(tfe.ModeKeys.TRAIN, loss=loss, train_op=tf.no_op())
    hooks = []
    cadences = util.summary_duty(spec, hooks, config, '/tmp/unused_model_dir')
  assert cadences == (None, None)
  kinds = sorted(type(hook).__name__ for hook in hooks)
  assert kinds == (['StepCounterHook', 'SummarySaverHook'] if expect_hooks else [])

def test_evaluation_hooks_from_the_model_fn(tmp_path):
  est = tfe.Estimator(model_fn, model_dir=str(tmp_path), config=tfe.RunConfig(
      session_config=test_util.session_config(num_cpus=1)))
  est.train(_input_fn, max_steps=20)
  captured = {}

  def capturing_model_fn(features, labels, mode, config):
    spec = model_fn(features, labels, mode, config)
    captured['hook'] = spec.evaluation_hooks[0]
    return spec

  tfe.Estimator(capturing_model_fn, model_dir=str(tmp_path)).evaluate(_input_fn, steps=2)
  np.testing.assert_allclose(captured['hook'].final_ops_values['w'],
                             est.get_variable_value('w'))


def test_a_hook_of_the_wrong_type_is_refused(tmp_path):
  est = tfe.Estimator(model_fn, model_dir=str(tmp_path))
  with pytest.raises(TypeError, match='SessionRunHook'):
    est.train(_input_fn, steps=1, hooks=[object()])


_MIGRATING = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'docs', 'migrating.md')).read()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
