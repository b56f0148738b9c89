"""Tests for estimator.exporter: Final/Latest/BestExporter.

The decision logic runs against `_RecordingEstimator`, which writes an empty
`<ts>/` directory per export (fast, and it records what was exported); the
real SavedModel path runs once at the end with a real Estimator.
BestExporter's seed comes from real eval event files.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import exporter as exporter_lib

tf.compat.v1.disable_eager_execution()


class _RecordingEstimator(object):
  """Just what exporters use of an Estimator: model_dir and export_saved_model."""

  def __init__(self, model_dir):
    self.model_dir = model_dir
    self.exports = []
    self._next_ts = 1700000000

  def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                         assets_extra=None, as_text=False, checkpoint_path=None):
    del serving_input_receiver_fn, assets_extra, as_text
    path = os.path.join(export_dir_base, str(self._next_ts))
    self._next_ts += 1
    os.makedirs(path)
    self.exports.append(checkpoint_path)
    return path.encode()


def _write_evals(eval_dir, records):
  # One file per call; a unique suffix, as two writers opened in the same
  # second would otherwise share (and truncate) one file name.
  _write_evals.count += 1
  writer = tf.compat.v1.summary.FileWriter(eval_dir, filename_suffix='.%d' % _write_evals.count)
  for step, loss in records.items():
    writer.add_summary(tf.compat.v1.Summary(
        value=[tf.compat.v1.Summary.Value(tag='loss', simple_value=loss)]), step)
  writer.close()


_write_evals.count = 0


def _export(exporter, estimator, step, loss, final=False):
  export_path = os.path.join(estimator.model_dir, 'export', exporter.name)
  return exporter.export(estimator, export_path, 'model.ckpt-%d' % step,
                         {'loss': np.float32(loss), 'global_step': step}, final)


def _evaluate_and_export(exporter, estimator, step, loss):
  """As train_and_evaluate does: the eval event is written before exporting."""
  _write_evals(os.path.join(estimator.model_dir, 'eval'), {step: loss})
  return _export(exporter, estimator, step, loss)


def _listed(estimator, name):
  return [os.path.basename(p) for _, p in exporter_lib.list_exports(
      os.path.join(estimator.model_dir, 'export', name))]


def test_final_exporter_exports_only_final(tmp_path):
  estimator = _RecordingEstimator(str(tmp_path))
  exporter = tfe.FinalExporter('final', lambda: None)
  assert exporter.name == 'final'
  assert _export(exporter, estimator, 100, 0.5) is None
  path = _export(exporter, estimator, 200, 0.4, final=True)
  assert path.endswith(b'/export/final/1700000000')
  assert estimator.exports == ['model.ckpt-200']


def test_latest_exporter_keeps_newest(tmp_path):
  estimator = _RecordingEstimator(str(tmp_path))
  exporter = tfe.LatestExporter('latest', lambda: None, exports_to_keep=2)
  os.makedirs(os.path.join(str(tmp_path), 'export', 'latest', 'temp-1699999999'))
  for step in (1, 2, 3):
    assert _export(exporter, estimator, step, 1.0) is not None
  assert _listed(estimator, 'latest') == ['1700000001', '1700000002']
  # Unfinished temp dirs are neither listed nor collected.
  assert os.path.isdir(os.path.join(str(tmp_path), 'export', 'latest', 'temp-1699999999'))
  keep_all = tfe.LatestExporter('all', lambda: None, exports_to_keep=None)
  for step in (1, 2, 3, 4, 5, 6):
    _export(keep_all, estimator, step, 1.0)
  assert len(_listed(estimator, 'all')) == 6


@pytest.mark.parametrize('cls', [tfe.LatestExporter, tfe.BestExporter])
@pytest.mark.parametrize('value', [0, -1])
def test_exports_to_keep_must_be_positive(cls, value):
  with pytest.raises(ValueError, match='`exports_to_keep`, if provided, must be a positive '
                     'number. Got %d' % value):
    cls(name='x', serving_input_receiver_fn=lambda: None, exports_to_keep=value)


def test_best_exporter_compare_fn_validation():
  with pytest.raises(ValueError, match='`compare_fn` must be callable.'):
    tfe.BestExporter(compare_fn=3)
  with pytest.raises(ValueError, match='must include best_eval_result argument.'):
    tfe.BestExporter(compare_fn=lambda current_eval_result: True)
  with pytest.raises(ValueError, match='must include current_eval_result argument.'):
    tfe.BestExporter(compare_fn=lambda best_eval_result: True)
  with pytest.raises(ValueError, match=r"has following not expected args: \['other'\]"):
    tfe.BestExporter(compare_fn=lambda best_eval_result, current_eval_result, other: True)
  assert tfe.BestExporter().name == 'best_exporter'


def test_default_compare_is_loss_and_needs_it():
  compare = exporter_lib._loss_smaller
  assert compare(best_eval_result={'loss': 0.5}, current_eval_result={'loss': 0.4})
  assert not compare(best_eval_result={'loss': 0.4}, current_eval_result={'loss': 0.4})
  with pytest.raises(ValueError, match='best_eval_result cannot be empty or no loss'):
    compare(best_eval_result={}, current_eval_result={'loss': 0.4})
  with pytest.raises(ValueError, match='current_eval_result cannot be empty or no loss'):
    compare(best_eval_result={'loss': 0.4}, current_eval_result={'accuracy': 0.4})


def test_best_exporter_exports_improvements_only(tmp_path):
  estimator = _RecordingEstimator(str(tmp_path))
  exporter = tfe.BestExporter(serving_input_receiver_fn=lambda: None, exports_to_keep=2)
  results = [_evaluate_and_export(exporter, estimator, step, loss) for step, loss in
             [(100, 0.5), (200, 0.6), (300, 0.4), (400, 0.4), (500, 0.3)]]
  assert [r is not None for r in results] == [True, False, True, False, True]
  assert estimator.exports == ['model.ckpt-100', 'model.ckpt-300', 'model.ckpt-500']
  assert _listed(estimator, 'best_exporter') == ['1700000001', '1700000002']


def test_best_exporter_restart_never_exports_worse_model(tmp_path):
  """tensorflow/tensorflow#47396: upstream always exported on a new process's first call."""
  estimator = _RecordingEstimator(str(tmp_path))
  first_run = tfe.BestExporter(serving_input_receiver_fn=lambda: None)
  for step, loss in [(100, 0.5), (200, 0.3), (300, 0.4)]:
    _evaluate_and_export(first_run, estimator, step, loss)
  assert estimator.exports == ['model.ckpt-100', 'model.ckpt-200']
  # The job restarts: a new exporter (new process) sees a worse model first.
  restarted = tfe.BestExporter(serving_input_receiver_fn=lambda: None)
  assert _evaluate_and_export(restarted, estimator, 400, 0.35) is None
  assert _evaluate_and_export(restarted, estimator, 500, 0.25) is not None
  # Another restart whose first model is the best ever: exported (its own eval
  # record, already in the event files, is not the bar it has to beat).
  assert _evaluate_and_export(tfe.BestExporter(serving_input_receiver_fn=lambda: None),
                              estimator, 600, 0.2) is not None
  assert estimator.exports == ['model.ckpt-100', 'model.ckpt-200', 'model.ckpt-500',
                               'model.ckpt-600']


def test_best_exporter_exports_when_nothing_exported_yet(tmp_path):
  """Eval records alone (e.g. BestExporter added later) never leave the job without export."""
  estimator = _RecordingEstimator(str(tmp_path))
  _write_evals(os.path.join(str(tmp_path), 'eval'), {100: 0.1, 200: 0.2})
  exporter = tfe.BestExporter(serving_input_receiver_fn=lambda: None)
  assert _evaluate_and_export(exporter, estimator, 300, 0.5) is not None
  # From now on the exported model is the bar: the 0.1 of step 100 was never
  # exported, so holding out for it would leave a worse export in place.
  assert _evaluate_and_export(exporter, estimator, 400, 0.6) is None
  assert _evaluate_and_export(exporter, estimator, 500, 0.4) is not None


def test_best_exporter_custom_compare_and_pattern(tmp_path):
  estimator = _RecordingEstimator(str(tmp_path))
  writer = tf.compat.v1.summary.FileWriter(os.path.join(str(tmp_path), 'eval_val'))
  writer.add_summary(tf.compat.v1.Summary(
      value=[tf.compat.v1.Summary.Value(tag='accuracy', simple_value=0.8)]), 100)
  writer.close()

  def higher_accuracy(best_eval_result, current_eval_result):
    return current_eval_result['accuracy'] > best_eval_result['accuracy']

  exporter = tfe.BestExporter(name='acc', serving_input_receiver_fn=lambda: None,
                              event_file_pattern='eval_val/*.tfevents.*',
                              compare_fn=higher_accuracy)
  export_path = os.path.join(str(tmp_path), 'export', 'acc')
  os.makedirs(os.path.join(export_path, '1600000000'))  # an earlier run's export
  assert exporter.export(estimator, export_path, 'c', {'accuracy': 0.7, 'global_step': 200},
                         False) is None
  assert exporter.export(estimator, export_path, 'c', {'accuracy': 0.9, 'global_step': 300},
                         False) is not None


def _model_fn(features, labels, mode):
  weight = tf.compat.v1.get_variable('w', [2, 1], initializer=tf.compat.v1.ones_initializer())
  predictions = tf.matmul(features['x'], weight)
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.reduce_mean(tf.square(predictions - labels))
  step = tf.compat.v1.train.get_or_create_global_step()
  return tfe.EstimatorSpec(mode, loss=loss, train_op=tf.compat.v1.assign_add(step, 1))


def test_latest_exporter_with_real_estimator(tmp_path):
  estimator = tfe.Estimator(_model_fn, model_dir=str(tmp_path / 'model'))

  def input_fn():
    x = np.ones([4, 2], np.float32)
    return tf.data.Dataset.from_tensors(({'x': x}, np.ones([4, 1], np.float32))).repeat()

  estimator.train(input_fn, max_steps=2)
  receiver_fn = tfe.export.build_raw_serving_input_receiver_fn(
      {'x': tf.compat.v1.placeholder(tf.float32, [None, 2])})
  exporter = tfe.LatestExporter('latest', receiver_fn, exports_to_keep=1)
  export_path = os.path.join(estimator.model_dir, 'export', 'latest')
  path = exporter.export(estimator, export_path, estimator.latest_checkpoint(),
                         {'loss': 1.0, 'global_step': 2}, True)
  path = path.decode() if isinstance(path, bytes) else path
  assert os.path.dirname(path) == export_path
  assert os.path.isfile(os.path.join(path, 'saved_model.pb'))
  assert os.path.isfile(os.path.join(path, 'variables', 'variables.index'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
