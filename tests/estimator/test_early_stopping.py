"""Tests for estimator.early_stopping (tfe.experimental.stop_if_*_hook).

Event files are real (written with a FileWriter, as Estimator.evaluate does),
hooks run in real MonitoredSessions, and the chief/worker STOP handshake runs
two sessions against one in-process gRPC server, as two tasks would.
"""

import os
import sys

import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import early_stopping

tf.compat.v1.disable_eager_execution()


def _write_evals(eval_dir, records, file_suffix=''):
  """Writes {step: {name: value}} as eval summaries (one event per step)."""
  writer = tf.compat.v1.summary.FileWriter(eval_dir, filename_suffix=file_suffix)
  for step, metrics in records.items():
    values = [tf.compat.v1.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
    writer.add_summary(tf.compat.v1.Summary(value=values), step)
  writer.close()


def _model_fn(features, labels, mode):
  del features, labels
  step = tf.compat.v1.train.get_or_create_global_step()
  loss = tf.constant(1.0)
  return tfe.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.assign_add(step, 1))


def _estimator(tmp_path, config=None):
  return tfe.Estimator(_model_fn, model_dir=str(tmp_path / 'model'), config=config)


def test_read_eval_metrics_merges_and_sorts(tmp_path):
  eval_dir = str(tmp_path / 'eval')
  _write_evals(eval_dir, {300: {'loss': 0.3}, 100: {'loss': 0.5, 'accuracy': 0.7}})
  _write_evals(eval_dir, {200: {'loss': 0.4}, 300: {'accuracy': 0.9}}, file_suffix='.b')
  # Not an eval event file: ignored.
  tf.io.gfile.makedirs(eval_dir)
  with open(os.path.join(eval_dir, 'notes.txt'), 'w') as f:
    f.write('x')
  metrics = early_stopping.read_eval_metrics(eval_dir)
  assert list(metrics) == [100, 200, 300]
  assert metrics[100] == pytest.approx({'loss': 0.5, 'accuracy': 0.7})
  assert metrics[300] == pytest.approx({'loss': 0.3, 'accuracy': 0.9})
  assert early_stopping.read_eval_metrics(str(tmp_path / 'missing')) == {}


def test_read_eval_metrics_skips_truncated_tail(tmp_path):
  eval_dir = str(tmp_path / 'eval')
  _write_evals(eval_dir, {100: {'loss': 0.5}, 200: {'loss': 0.4}})
  (path,) = tf.io.gfile.glob(os.path.join(eval_dir, 'events.out.tfevents.*'))
  with open(path, 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:
    f.write(data[:-5])  # a writer killed mid-record
  assert list(early_stopping.read_eval_metrics(eval_dir)) == [100]


def _run_steps(hooks, num_steps):
  """Trains a counter with `hooks`; returns the global steps that ran.

  The step is incremented outside the hooked run: a hook's read of the global
  step inside the same run as `assign_add` may see the old or the new value
  (no control dependency orders them), and the test must not depend on which.
  """
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    increment = tf.compat.v1.assign_add(step, 1)
    train_op = tf.no_op()
    ran = []
    with tf.compat.v1.train.SingularMonitoredSession(hooks=hooks) as sess:
      while not sess.should_stop() and len(ran) < num_steps:
        sess.run(train_op)
        ran.append(int(sess.raw_session().run(increment)))
    return ran


def test_predicate_hook_stops_and_sets_flag_every_n_steps():
  checked = []

  def should_stop():
    checked.append(True)
    return len(checked) >= 3

  hook = early_stopping._StopOnPredicateHook(should_stop, run_every_secs=None,
                                             run_every_steps=4)
  ran = _run_steps([hook], 100)
  # Checked in runs 1, 5, 9 (global steps 0, 4, 8 seen): STOP is set after the
  # third check and training stops one run later, so that a last checkpoint
  # can carry the flag.
  assert ran == list(range(1, 11))
  assert len(checked) == 3


def test_predicate_hook_rejects_non_callable():
  with pytest.raises(TypeError, match='`should_stop_fn` must be callable.'):
    early_stopping._StopOnPredicateHook(42)


def test_chief_flag_stops_other_worker_through_shared_variable():
  """The chief sets STOP on the (shared) server; the worker's hook sees it and stops."""
  server = tf.distribute.Server.create_local_server()
  device = '/job:localhost/replica:0/task:0/device:CPU:0'
  with tf.Graph().as_default():
    with tf.compat.v1.device(device):
      step = tf.compat.v1.train.get_or_create_global_step()
      train_op = tf.compat.v1.assign_add(step, 1)
    hook = early_stopping._CheckForStoppingHook(stop_var_device=device)
    creator = tf.compat.v1.train.ChiefSessionCreator(master=server.target)
    worker_steps = []
    with tf.compat.v1.train.MonitoredSession(creator, hooks=[hook]) as sess:
      for _ in range(3):
        worker_steps.append(sess.run(train_op))
      assert not sess.should_stop()
      # The chief, in its own graph and session, decides to stop.
      with tf.Graph().as_default():
        chief_hook = early_stopping._StopOnPredicateHook(
            lambda: True, run_every_secs=None, run_every_steps=1, stop_var_device=device)
        with tf.compat.v1.device(device):
          tf.compat.v1.train.get_or_create_global_step()
        chief_hook.begin()
        with tf.compat.v1.Session(server.target) as chief_sess:
          chief_sess.run(chief_hook._stop_op)
      while not sess.should_stop():
        worker_steps.append(sess.run(train_op))
  assert worker_steps == [1, 2, 3, 4]


def test_restarted_chief_clears_restored_stop_flag(tmp_path):
  """A run resumed after an early stop (say, with more patience) must not stop workers."""
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    stop_var = early_stopping._get_or_create_stop_var()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run([stop_var.assign(True), step.assign(5)])
      tf.compat.v1.train.Saver().save(sess, str(tmp_path / 'model.ckpt'), global_step=5)
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.assign_add(step, 1)
    hooks = [early_stopping._StopOnPredicateHook(lambda: False, None, 1),
             early_stopping._CheckForStoppingHook()]
    creator = tf.compat.v1.train.ChiefSessionCreator(checkpoint_dir=str(tmp_path))
    with tf.compat.v1.train.MonitoredSession(creator, hooks=hooks) as sess:
      ran = [sess.run(train_op) for _ in range(3)]
      assert not sess.should_stop()
  assert ran == [6, 7, 8]


def test_checkpoint_requested_stop(tmp_path):
  for value in (False, True):
    with tf.Graph().as_default():
      stop_var = early_stopping._get_or_create_stop_var()
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(stop_var.assign(value))
        path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / ('ckpt_%s' % value)))
    assert early_stopping.checkpoint_requested_stop(path) is value
  with tf.Graph().as_default():
    other = tf.compat.v1.get_variable('w', [], initializer=tf.compat.v1.zeros_initializer())
    with tf.compat.v1.Session() as sess:
      sess.run(other.initializer)
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / 'no_flag'))
  assert early_stopping.checkpoint_requested_stop(path) is False
  assert early_stopping.checkpoint_requested_stop(str(tmp_path / 'missing')) is False


def test_make_hook_argument_errors(tmp_path):
  with pytest.raises(TypeError, match='`estimator` must have type `tf.estimator.Estimator`'):
    tfe.experimental.make_early_stopping_hook(object(), lambda: False)
  estimator = _estimator(tmp_path)
  with pytest.raises(ValueError, match='Only one of `run_every_secs` and `run_every_steps`'):
    tfe.experimental.stop_if_no_decrease_hook(estimator, 'loss', 10, run_every_steps=5)


def test_make_hook_is_chief_or_polling_by_task(tmp_path, monkeypatch):
  estimator = _estimator(tmp_path)
  hook = tfe.experimental.make_early_stopping_hook(estimator, lambda: False)
  assert isinstance(hook, early_stopping._StopOnPredicateHook)
  cluster = {'chief': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2'], 'ps': ['127.0.0.1:3']}
  monkeypatch.setenv('TF_CONFIG', '{"cluster": %s, "task": {"type": "worker", "index": 0}}'
                     % str(cluster).replace("'", '"'))
  worker = _estimator(tmp_path, config=tfe.RunConfig())
  hook = tfe.experimental.make_early_stopping_hook(worker, lambda: False)
  assert isinstance(hook, early_stopping._CheckForStoppingHook)
  assert hook._stop_var_device == '/job:ps/task:0/device:CPU:0'


def _should_stop(hook):
  return hook._should_stop_fn()


@pytest.mark.parametrize('factory,metric,arg,min_steps,expected', [
    # loss best at 200 (0.2); 400 - 200 >= 200.
    ('stop_if_no_decrease_hook', 'loss', 200, 0, True),
    ('stop_if_no_decrease_hook', 'loss', 201, 0, False),
    # from step 300 on the best loss is 0.3 at 300; 400 - 300 < 200.
    ('stop_if_no_decrease_hook', 'loss', 200, 300, False),
    # accuracy best at 300 (0.9); 400 - 300 >= 100.
    ('stop_if_no_increase_hook', 'accuracy', 100, 0, True),
    ('stop_if_no_increase_hook', 'accuracy', 101, 0, False),
    ('stop_if_higher_hook', 'accuracy', 0.85, 0, True),
    ('stop_if_higher_hook', 'accuracy', 0.9, 0, False),
    ('stop_if_lower_hook', 'loss', 0.25, 0, True),
    ('stop_if_lower_hook', 'loss', 0.25, 300, False),
])
def test_stop_predicates(tmp_path, factory, metric, arg, min_steps, expected):
  estimator = _estimator(tmp_path)
  _write_evals(estimator.eval_dir(), {
      100: {'loss': 0.5, 'accuracy': 0.5}, 200: {'loss': 0.2, 'accuracy': 0.8},
      300: {'loss': 0.3, 'accuracy': 0.9}, 400: {'loss': 0.35, 'accuracy': 0.85}})
  hook = getattr(tfe.experimental, factory)(estimator, metric, arg, min_steps=min_steps)
  assert _should_stop(hook) is expected


def test_predicate_reads_named_eval_dir_and_missing_metric_raises(tmp_path):
  estimator = _estimator(tmp_path)
  _write_evals(estimator.eval_dir('val'), {100: {'loss': 0.5}, 200: {'loss': 0.6}})
  hook = tfe.experimental.stop_if_no_decrease_hook(
      estimator, 'loss', 100, eval_dir=estimator.eval_dir('val'))
  assert _should_stop(hook) is True
  hook = tfe.experimental.stop_if_no_decrease_hook(estimator, 'loss', 100)
  assert _should_stop(hook) is False  # eval/ is empty
  hook = tfe.experimental.stop_if_higher_hook(
      estimator, 'auc', 0.5, eval_dir=estimator.eval_dir('val'))
  with pytest.raises(KeyError):
    _should_stop(hook)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
