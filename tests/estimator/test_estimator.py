"""Estimator train / evaluate / predict / export on an MNIST-like model_fn.

Real graphs, sessions, checkpoints and SavedModels; the export is loaded in a
fresh eager TF2 process. Also: model_dir layout, resume, step arguments,
tf.estimator's error texts, and num_clones=2 on two virtual CPU devices
training exactly like one clone.
"""

import glob
import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from deployment import model_deploy
from tests import test_util
from tests.estimator import mnist_testlib as mnist
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(**kwargs):
  kwargs.setdefault('save_checkpoints_steps', 20)
  kwargs.setdefault('log_step_count_steps', 10)
  kwargs.setdefault('tf_random_seed', 7)
  kwargs.setdefault('session_config', test_util.session_config(num_cpus=2))
  return tfe.RunConfig(**kwargs)


def _estimator(model_dir, params=None, **config_kwargs):
  return tfe.Estimator(mnist.model_fn, model_dir=str(model_dir), config=_config(**config_kwargs),
                       params=params or {})


def _read_events(directory):
  """{tag: [(step, value)]} of the scalar and string-tensor summaries in `directory`."""
  values = {}
  for path in sorted(glob.glob(os.path.join(directory, 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField('simple_value'):
          values.setdefault(value.tag, []).append((event.step, value.simple_value))
        elif value.HasField('tensor') and value.tensor.dtype == tf.string.as_datatype_enum:
          values.setdefault(value.tag, []).append(
              (event.step, value.tensor.string_val[0].decode()))
  return values


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A model trained for 60 steps; tests copy its model_dir before changing it."""
  model_dir = tmp_path_factory.mktemp('trained')
  est = _estimator(model_dir)
  assert est.train(mnist.train_input_fn(), max_steps=60) is est
  return str(model_dir)


def _copy(model_dir, tmp_path):
  target = str(tmp_path / 'model')
  shutil.copytree(model_dir, target)
  return target


def test_model_dir_layout(trained):
  names = set(os.listdir(trained))
  for step in (0, 20, 40, 60):
    for suffix in ('index', 'data-00000-of-00001', 'meta'):
      assert 'model.ckpt-%d.%s' % (step, suffix) in names
  assert {'checkpoint', 'graph.pbtxt'} <= names
  assert glob.glob(os.path.join(trained, 'events.out.tfevents.*'))
  state = tf.train.get_checkpoint_state(trained)
  assert os.path.basename(state.model_checkpoint_path) == 'model.ckpt-60'
  with open(os.path.join(trained, 'checkpoint')) as f:
    assert 'model_checkpoint_path: "model.ckpt-60"' in f.read()  # Relative paths.
  events = _read_events(trained)
  assert 'loss' in events and 'global_step/sec' in events


def test_evaluate_returns_metrics_and_writes_eval_events(trained, tmp_path):
  model_dir = _copy(trained, tmp_path)
  est = _estimator(model_dir)
  metrics = est.evaluate(mnist.eval_input_fn())
  assert set(metrics) == {'accuracy', 'loss', 'global_step'}
  assert metrics['global_step'] == 60
  assert metrics['accuracy'] > 0.8 and metrics['loss'] < 1.0
  events = _read_events(os.path.join(model_dir, 'eval'))
  assert events['accuracy'] == [(60, pytest.approx(float(metrics['accuracy'])))]
  assert events['checkpoint_path'] == [(60, os.path.join(model_dir, 'model.ckpt-60'))]
  assert 'global_step' not in events
  # A named evaluation, limited steps, on an older checkpoint.
  metrics = est.evaluate(mnist.eval_input_fn(batch_size=16), steps=2, name='train_data',
                         checkpoint_path=os.path.join(model_dir, 'model.ckpt-20'))
  assert metrics['global_step'] == 20
  assert est.eval_dir('train_data') == os.path.join(model_dir, 'eval_train_data')
  assert _read_events(est.eval_dir('train_data'))['loss'][0][0] == 20


def test_evaluate_without_checkpoint_uses_initialization(tmp_path):
  metrics = _estimator(tmp_path).evaluate(mnist.eval_input_fn(), steps=1)
  assert metrics['global_step'] == 0
  assert not os.path.exists(os.path.join(str(tmp_path), 'eval', 'checkpoint'))


def test_predict(trained):
  est = _estimator(trained)
  images, labels = mnist.make_data(20, seed=5)
  preds = list(est.predict(mnist.predict_input_fn(images)))
  assert len(preds) == 20
  assert set(preds[0]) == {'classes', 'probabilities', 'logits'}
  assert np.mean([p['classes'] for p in preds] == labels) > 0.8
  only = list(est.predict(mnist.predict_input_fn(images), predict_keys=['classes']))
  assert set(only[0]) == {'classes'}
  batches = list(est.predict(mnist.predict_input_fn(images, batch_size=8),
                             yield_single_examples=False))
  assert [b['classes'].shape[0] for b in batches] == [8, 8, 4]
  with pytest.raises(ValueError, match=r'Expected to run at least one output from'):
    next(est.predict(mnist.predict_input_fn(images), predict_keys=['nope']))


def test_get_variable_values_and_names(trained, tmp_path):
  est = _estimator(trained)
  names = est.get_variable_names()
  assert {'global_step', 'hidden/weights', 'logits/biases'} <= set(names)
  assert est.get_variable_value('global_step') == 60
  assert est.get_variable_value('hidden/weights').shape == (64, 16)
  assert est.latest_checkpoint() == os.path.join(trained, 'model.ckpt-60')
  empty = _estimator(tmp_path)
  for call in (empty.get_variable_names, lambda: empty.get_variable_value('x')):
    with pytest.raises(ValueError, match='Could not find trained model in model_dir: '):
      call()


def test_resume_steps_max_steps_and_listeners(trained, tmp_path):
  model_dir = _copy(trained, tmp_path)
  est = _estimator(model_dir)
  est.train(mnist.train_input_fn(), max_steps=60)  # Already there: skipped.
  assert est.get_variable_value('global_step') == 60
  est.train(mnist.train_input_fn(), steps=10)  # Incremental.
  assert est.get_variable_value('global_step') == 70

  class Listener(tf.compat.v1.train.CheckpointSaverListener):
    steps = []

    def after_save(self, session, global_step_value):
      self.steps.append(global_step_value)

  est.train(mnist.train_input_fn(), max_steps=100, saving_listeners=[Listener()])
  assert est.get_variable_value('global_step') == 100
  # The saver hook counts from the session's first step (70), like tf.estimator's.
  assert Listener.steps == [70, 90, 100]
  no_saves = _estimator(model_dir, save_checkpoints_steps=None, save_checkpoints_secs=None)
  with pytest.raises(ValueError, match='There should be a CheckpointSaverHook to use '
                     'saving_listeners'):
    no_saves.train(mnist.train_input_fn(), steps=1, saving_listeners=[Listener()])


@pytest.mark.parametrize('kwargs, message', [
    ({'steps': 1, 'max_steps': 2}, 'Can not provide both steps and max_steps.'),
    ({'steps': 0}, 'Must specify steps > 0, given: 0'),
    ({'max_steps': -1}, 'Must specify max_steps > 0, given: -1'),
])
def test_train_step_errors(tmp_path, kwargs, message):
  with pytest.raises(ValueError, match='^' + message):
    _estimator(tmp_path).train(mnist.train_input_fn(), **kwargs)


def test_train_on_ps_or_evaluator_is_an_error(tmp_path, monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['localhost:1'], 'ps': ['localhost:2']},
      'task': {'type': 'evaluator', 'index': 0}}))
  est = tfe.Estimator(mnist.model_fn, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='^Train has been called wrong configuration'):
    est.train(mnist.train_input_fn(), steps=1)


def test_model_fn_argument_errors(tmp_path):
  with pytest.raises(ValueError, match='model_fn must be provided to Estimator.'):
    tfe.Estimator(None)
  with pytest.raises(ValueError, match=r'model_fn \(.*\) must include features argument.'):
    tfe.Estimator(lambda labels, mode: None, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r'does not include params argument, but params '
                     r"\(\{'a': 1\}\) is passed to Estimator."):
    tfe.Estimator(lambda features, labels: None, model_dir=str(tmp_path), params={'a': 1})
  with pytest.raises(ValueError, match=r"has following not expected args: \['batch'\]"):
    tfe.Estimator(lambda features, batch: None, model_dir=str(tmp_path))


def test_model_fn_call_errors(tmp_path):
  def no_labels(features, mode):
    return tfe.EstimatorSpec(mode, predictions=features['images'])
  with pytest.raises(ValueError, match='model_fn does not take labels, but input_fn returns '
                     'labels.'):
    tfe.Estimator(no_labels, model_dir=str(tmp_path)).train(mnist.train_input_fn(), steps=1)

  def not_a_spec(features, labels):
    return {'loss': tf.constant(0.0)}
  with pytest.raises(ValueError, match='model_fn should return an EstimatorSpec.'):
    tfe.Estimator(not_a_spec, model_dir=str(tmp_path)).evaluate(mnist.eval_input_fn())

  def bad_input_fn():
    return tf.constant([1.0]), tf.constant([1]), tf.constant([2])
  with pytest.raises(ValueError, match=r'input_fn should return \(features, labels\) as a len '
                     '2 tuple.'):
    _estimator(tmp_path).train(bad_input_fn, steps=1)


def test_reserved_metric_names(tmp_path):
  def model_fn(features, labels, mode):
    loss = tf.reduce_mean(features['images']) * 0.0
    return tfe.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'loss': tf.compat.v1.metrics.mean(loss)})
  with pytest.raises(ValueError, match='Metric with name "loss" is not allowed, because '
                     'Estimator already defines a default metric with the same name.'):
    tfe.Estimator(model_fn, model_dir=str(tmp_path)).evaluate(mnist.eval_input_fn())


def test_config_and_model_dir(tmp_path):
  est = tfe.Estimator(mnist.model_fn, params={})
  assert os.path.isdir(est.model_dir) and est.config.model_dir == est.model_dir
  session_config = est.config.session_config
  assert session_config.allow_soft_placement
  assert session_config.graph_options.rewrite_options.meta_optimizer_iterations == 1
  shutil.rmtree(est.model_dir)
  config = tfe.RunConfig(model_dir=str(tmp_path / 'a'))
  assert tfe.Estimator(mnist.model_fn, config=config).model_dir == str(tmp_path / 'a')
  with pytest.raises(ValueError, match='`model_dir` are set both in constructor and '
                     '`RunConfig`, but with different values'):
    tfe.Estimator(mnist.model_fn, model_dir=str(tmp_path / 'b'), config=config)
  with pytest.raises(ValueError, match='config must be an instance of `RunConfig`'):
    tfe.Estimator(mnist.model_fn, config={'model_dir': 'x'})
  assert est.params == {} and est.params is not est.params


def test_input_fn_returning_tensors_and_receiving_mode(tmp_path):
  seen = []

  def input_fn(mode, config):
    seen.append((mode, config.model_dir))
    images, labels = mnist.make_data(64)
    ds = tf.compat.v1.data.Dataset.from_tensor_slices(({'images': images}, labels))
    return tf.compat.v1.data.make_one_shot_iterator(ds.repeat().batch(16)).get_next()

  est = _estimator(tmp_path)
  est.train(input_fn, steps=3)
  assert seen == [('train', str(tmp_path))]
  assert est.get_variable_value('global_step') == 3


def test_export_saved_model_loads_in_eager_tf2(trained, tmp_path):
  est = _estimator(trained)
  base = str(tmp_path / 'export' / 'Servo')
  assets = tmp_path / 'vocab.txt'
  assets.write_text('a\nb\n')
  previous_umask = os.umask(0o022)
  try:
    path = est.export_saved_model(base, mnist.serving_input_receiver_fn,
                                  assets_extra={'vocab/vocab.txt': str(assets)})
  finally:
    os.umask(previous_umask)
  assert isinstance(path, bytes)
  path = path.decode()
  # Staged with the umask's mode, as every other output (not mkdtemp's 0700).
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
  assert os.path.dirname(path) == base and len(os.path.basename(path)) == 10
  assert os.listdir(base) == [os.path.basename(path)]  # The temp dir was renamed away.
  assert {'saved_model.pb', 'variables', 'assets.extra'} <= set(os.listdir(path))
  assert os.path.exists(os.path.join(path, 'assets.extra', 'vocab', 'vocab.txt'))

  images, _ = mnist.make_data(5, seed=9)
  expected = np.stack([p['probabilities'] for p in est.predict(mnist.predict_input_fn(images))])
  np.save(str(tmp_path / 'images.npy'), images)
  script = (
      'import sys, json, numpy as np, tensorflow as tf\n'
      'assert tf.executing_eagerly()\n'
      'loaded = tf.saved_model.load(sys.argv[1])\n'
      'sig = loaded.signatures["serving_default"]\n'
      'out = sig(images=tf.constant(np.load(sys.argv[2])))\n'
      'np.save(sys.argv[3], out["probabilities"].numpy())\n'
      'print(json.dumps(sorted(loaded.signatures.keys())))\n')
  result = subprocess.run(
      [sys.executable, '-c', script, path, str(tmp_path / 'images.npy'),
       str(tmp_path / 'probs.npy')], capture_output=True, text=True, timeout=120,
      env=dict(os.environ, PYTHONPATH=REPO_ROOT, CUDA_VISIBLE_DEVICES=''))
  assert result.returncode == 0, result.stderr[-3000:]
  # The classify signature needs a string input, so it was excluded.
  assert json.loads(result.stdout.strip().splitlines()[-1]) == ['serving_default']
  np.testing.assert_allclose(np.load(str(tmp_path / 'probs.npy')), expected, rtol=1e-5)


def test_export_errors(tmp_path):
  est = _estimator(tmp_path)
  with pytest.raises(ValueError, match='An input_receiver_fn must be defined.'):
    est.export_saved_model(str(tmp_path / 'e'), None)
  with pytest.raises(ValueError, match="Couldn't find trained model at "):
    est.export_saved_model(str(tmp_path / 'e'), mnist.serving_input_receiver_fn)


def test_export_with_parsing_receiver_keeps_classify_signature(trained, tmp_path):
  est = _estimator(trained)
  spec = {'images': tf.io.FixedLenFeature([mnist.IMAGE_SIZE, mnist.IMAGE_SIZE], tf.float32)}
  path = est.export_saved_model(str(tmp_path), tfe.export.build_parsing_serving_input_receiver_fn(
      spec), as_text=True).decode()
  assert os.path.exists(os.path.join(path, 'saved_model.pbtxt'))
  images, _ = mnist.make_data(2, seed=4)
  examples = [tf.train.Example(features=tf.train.Features(feature={
      'images': tf.train.Feature(float_list=tf.train.FloatList(value=image.ravel()))}))
              .SerializeToString() for image in images]
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta_graph = tf.compat.v1.saved_model.loader.load(sess, ['serve'], path)
    signatures = meta_graph.signature_def
    assert set(signatures) == {'serving_default', 'classify'}
    classify = signatures['classify']
    assert classify.method_name == 'tensorflow/serving/classify'
    scores = sess.run(classify.outputs['scores'].name,
                      {classify.inputs['inputs'].name: examples})
  expected = [p['probabilities'] for p in est.predict(mnist.predict_input_fn(images))]
  np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_predict_non_dict_predictions_and_hooks(trained):
  def model_fn(features, labels, mode):
    del labels
    weights = tf.compat.v1.get_variable('hidden/weights', [64, 16])
    return tfe.EstimatorSpec(mode, predictions=tf.matmul(
        tf.reshape(features['images'], [-1, 64]), weights))

  class Counter(tf.compat.v1.train.SessionRunHook):
    runs = 0

    def after_run(self, run_context, run_values):
      Counter.runs += 1

  est = tfe.Estimator(model_fn, model_dir=trained)
  images, _ = mnist.make_data(6)
  preds = list(est.predict(mnist.predict_input_fn(images, batch_size=4), hooks=[Counter()]))
  assert len(preds) == 6 and preds[0].shape == (16,) and Counter.runs == 2
  with pytest.raises(ValueError, match='predict_keys argument is not valid in case of '
                     'non-dict predictions.'):
    next(est.predict(mnist.predict_input_fn(images), predict_keys=['a']))


def test_subclasses_may_not_override_members(tmp_path):
  class Custom(tfe.Estimator):
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
      return self

  class Allowed(tfe.Estimator):
    def latest_checkpoint(self):
      return None

  with pytest.raises(ValueError, match=r"Subclasses of Estimator cannot override members of "
                     r"Estimator\. .* does override \['train'\]"):
    Custom(mnist.model_fn, model_dir=str(tmp_path))
  assert Allowed(mnist.model_fn, model_dir=str(tmp_path)).latest_checkpoint() is None


class _DevicesHook(tf.compat.v1.train.SessionRunHook):
  """Records the devices that ops of each clone were placed on."""

  def begin(self):
    graph = tf.compat.v1.get_default_graph()
    self.devices = {op.device for op in graph.get_operations()
                    if op.name.startswith('clone_1/') and op.type == 'MatMul'}


def _train_with_clones(model_dir, num_clones):
  deploy = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_devices=['/device:CPU:%d' % i for i in range(num_clones)])
  est = _estimator(model_dir, params={'optimizer': 'momentum'}, deployment_config=deploy)
  hook = _DevicesHook()
  est.train(mnist.train_input_fn(batch_size=32, shuffle=False), max_steps=15, hooks=[hook])
  return est, hook


def test_two_clones_train_like_one(tmp_path):
  one, _ = _train_with_clones(tmp_path / 'one', 1)
  two, hook = _train_with_clones(tmp_path / 'two', 2)
  assert hook.devices and all(d.endswith('CPU:1') for d in hook.devices)
  names = one.get_variable_names()
  assert names == two.get_variable_names()  # Same checkpoint names: no clone scopes.
  for name in names:
    np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-4, atol=1e-6, err_msg=name)
  # A 2-clone checkpoint evaluates with the ordinary single-graph Estimator.
  assert two.evaluate(mnist.eval_input_fn(), steps=1)['global_step'] == 15


def test_num_clones_requires_an_optimizer_train_op(tmp_path):
  def model_fn(features, labels, mode):
    loss = tf.reduce_mean(features['images']) + 0.0 * tf.reduce_sum(tf.cast(labels, tf.float32))
    step = tf.compat.v1.train.get_global_step()
    return tfe.EstimatorSpec(mode, loss=loss, train_op=step.assign_add(1))
  config = _config(num_clones=2, clone_on_cpu=True)
  est = tfe.Estimator(model_fn, model_dir=str(tmp_path), config=config)
  with pytest.raises(ValueError, match='built its train_op without'):
    est.train(mnist.train_input_fn(), steps=1)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
