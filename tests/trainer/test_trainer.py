"""Tests for trainer.trainer.train() with small real models on CPU devices."""

import contextlib
import logging
import os
import re
import shutil
import sys
import threading
import time

from absl import logging as absl_logging
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from core import model as model_lib
from core import numerics
from core import standard_fields as fields
from protos import train_pb2
from google.protobuf import text_format
from tests import test_util
from trainer import trainer
from trainer import training_loop

tf.compat.v1.disable_eager_execution()

NUM_CLASSES = 2


def create_tensor_dict_fn(image=None):
  """One synthetic example: the image's mean colour encodes the box."""
  if image is None:
    image = tf.random.uniform([8, 8, 3], 0, 255, dtype=tf.float32, seed=1)
  center = tf.reduce_mean(image) / 255.0
  box = tf.stack([center * 0.5, center * 0.5, 0.5 + center * 0.5, 0.5 + center * 0.5])
  return {
      fields.InputDataFields.image: image,
      fields.InputDataFields.groundtruth_boxes: tf.reshape(box, [1, 4]),
      fields.InputDataFields.groundtruth_classes: tf.constant([1], tf.int64),
  }


class TinyDetectionModel(model_lib.DetectionModel):
  """A regression 'detector': enough to exercise every trainer path."""

  def preprocess(self, inputs):
    shapes = tf.tile(tf.constant([[8, 8, 3]], tf.int32), [tf.shape(inputs)[0], 1])
    return inputs / 255.0, shapes

  def predict(self, preprocessed_inputs, true_image_shapes):
    features = slim.conv2d(preprocessed_inputs, 4, [3, 3], scope='FeatureExtractor/conv')
    pooled = tf.reduce_mean(features, [1, 2])
    return {
        'boxes': slim.fully_connected(pooled, 4, activation_fn=None, scope='BoxPredictor'),
        'logits': slim.fully_connected(pooled, NUM_CLASSES, activation_fn=None,
                                       scope='ClassPredictor'),
    }

  def postprocess(self, prediction_dict, true_image_shapes, **params):
    return {'detection_boxes': tf.expand_dims(prediction_dict['boxes'], 1)}

  def loss(self, prediction_dict, true_image_shapes):
    boxes = tf.stack([b[0] for b in self.groundtruth_lists('boxes')])
    classes = tf.stack([c[0] for c in self.groundtruth_lists('classes')])
    return {
        'Loss/localization_loss': tf.reduce_mean(
            tf.square(prediction_dict['boxes'] - boxes)),
        'Loss/classification_loss': tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits(
                labels=classes, logits=prediction_dict['logits'])),
    }

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return {v.op.name: v for v in slim.get_model_variables()}


def _train_config(**overrides):
  config = text_format.Parse("""
      batch_size: 4
      num_steps: 6
      startup_delay_steps: 0
      batch_queue_capacity: 8
      num_batch_queue_threads: 1
      prefetch_queue_capacity: 2
      save_interval_secs: 0
      log_every_n_steps: 2
      optimizer { sgd_optimizer { learning_rate {
          constant_learning_rate { learning_rate: 0.1 } } } }
  """, train_pb2.TrainConfig())
  for key, value in overrides.items():
    if isinstance(value, list):
      getattr(config, key).extend(value)
    else:
      setattr(config, key, value)
  return config


def create_same_example_fn():
  """Always the same example: a batch does not depend on how often the input ran.

  (The random image above advances with every evaluation, and threads of the
  trainer may evaluate it in a different order from run to run.)
  """
  return create_tensor_dict_fn(
      tf.random.stateless_uniform([8, 8, 3], seed=[1, 2], minval=0, maxval=255))


def _train(train_dir, train_config, num_clones=1, num_cpus=1,
           tensor_dict_fn=create_tensor_dict_fn):
  return trainer.train(
      tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES), train_config,
      master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir,
      session_config_override=test_util.session_config(num_cpus=num_cpus))


def _read(checkpoint_dir, name):
  return tf.train.load_variable(tf.train.latest_checkpoint(checkpoint_dir), name)


def test_trains_one_clone_and_checkpoints_the_last_step(tmp_path):
  loss = _train(str(tmp_path), _train_config())
  assert np.isfinite(loss)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-6')
  assert os.path.exists(os.path.join(str(tmp_path), 'checkpoint'))


def test_trains_two_clones(tmp_path):
  _train(str(tmp_path), _train_config(), num_clones=2, num_cpus=2)
  assert _read(str(tmp_path), 'global_step') == 6


def test_more_clones_than_gpus_without_clone_on_cpu_is_an_error(tmp_path):
  num_gpus = len(tf.config.list_physical_devices('GPU'))
  with pytest.raises(ValueError, match='num_clones=%d needs one GPU per clone, but %d GPU' % (
      num_gpus + 2, num_gpus)):
    trainer.train(
        create_tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES),
        _train_config(batch_size=4 * (num_gpus + 2)), master='', task=0,
        num_clones=num_gpus + 2, worker_replicas=1, clone_on_cpu=False, ps_tasks=0,
        worker_job_name='worker', is_chief=True, train_dir=str(tmp_path))
  assert not tf.io.gfile.glob(os.path.join(str(tmp_path), 'model.ckpt*'))


def test_record_class_id_above_num_classes_stops_training(tmp_path):
  def tensor_dict_with_class_3():
    tensor_dict = create_tensor_dict_fn()
    tensor_dict[fields.InputDataFields.groundtruth_classes] = tf.constant([3], tf.int64)
    return tensor_dict

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='groundtruth_classes has a class id outside 1..num_classes=2'):
    trainer.train(
        tensor_dict_with_class_3, lambda: TinyDetectionModel(NUM_CLASSES), _train_config(),
        master='', task=0, num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
        worker_job_name='worker', is_chief=True, train_dir=str(tmp_path),
        session_config_override=test_util.session_config(num_cpus=1))


def test_batch_not_divisible_by_clones_is_an_error(tmp_path):
  with pytest.raises(ValueError, match='batch_size=4 is not divisible by num_clones=3'):
    _train(str(tmp_path), _train_config(), num_clones=3)


def test_freeze_keeps_frozen_variables_unchanged(tmp_path):
  first = tmp_path / 'first'
  _train(str(first), _train_config(num_steps=1))
  before = _read(str(first), 'BoxPredictor/weights')
  _train(str(first), _train_config(num_steps=5, freeze_variables=['BoxPredictor']))
  np.testing.assert_array_equal(before, _read(str(first), 'BoxPredictor/weights'))
  assert _read(str(first), 'global_step') == 5


def test_fine_tune_restores_model_variables_but_not_the_global_step(tmp_path):
  source, target = str(tmp_path / 'source'), str(tmp_path / 'target')
  _train(source, _train_config(num_steps=3))
  config = _train_config(num_steps=1, fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         fine_tune_checkpoint_type='detection')
  config.optimizer.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.0
  _train(target, config)
  assert _read(target, 'global_step') == 1
  for name in ('BoxPredictor/weights', 'FeatureExtractor/conv/weights'):
    np.testing.assert_array_equal(_read(source, name), _read(target, name))


class _RecordingModel(TinyDetectionModel):
  """Remembers the checkpoint type `build_init_fn` asked it for."""

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    self.asked_type = fine_tune_checkpoint_type
    return super().restore_map(fine_tune_checkpoint_type, load_all_detection_checkpoint_vars)


@pytest.mark.parametrize('from_detection, expected', [(True, 'detection'),
                                                      (False, 'classification')])
def test_build_init_fn_picks_the_deprecated_type_without_writing_the_config(
    tmp_path, from_detection, expected):
  source = str(tmp_path / 'source')
  _train(source, _train_config(num_steps=1))
  config = _train_config(fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         from_detection_checkpoint=from_detection)
  before = config.SerializeToString()
  with tf.Graph().as_default():
    model = _RecordingModel(NUM_CLASSES)
    model.predict(tf.zeros([1, 8, 8, 3]), None)
    assert trainer.build_init_fn(model, config) is not None
  assert model.asked_type == expected
  assert config.SerializeToString() == before
  assert not config.HasField('fine_tune_checkpoint_type')


def test_build_training_graph_then_run_training_is_train(tmp_path):
  config = _train_config(num_steps=3)
  graph = trainer.build_training_graph(
      create_tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES), config, task=0,
      num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
      worker_job_name='worker')
  assert isinstance(graph, trainer.TrainingGraph)
  assert graph.sync_optimizer is None and graph.init_fn is None
  assert graph.train_tensor.graph is graph.graph
  assert graph.step_after_update.op.name.startswith('global_step_after_update/')
  # Nothing ran yet: no checkpoint.
  assert tf.train.latest_checkpoint(str(tmp_path)) is None
  loss = trainer.run_training(graph, config, str(tmp_path),
                              session_config_override=test_util.session_config(num_cpus=1))
  assert np.isfinite(loss)
  assert _read(str(tmp_path), 'global_step') == 3


def test_train_takes_its_run_settings_as_one_object(tmp_path):
  settings = trainer.TrainSettings(
      train_dir=str(tmp_path / 'unused'), num_clones=2, clone_on_cpu=True,
      session_config_override=test_util.session_config(num_cpus=2))
  # An argument given to train() overrides the object's field.
  loss = trainer.train(create_tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES),
                       _train_config(num_steps=2), train_dir=str(tmp_path), settings=settings)
  assert np.isfinite(loss)
  assert _read(str(tmp_path), 'global_step') == 2
  assert not os.path.exists(str(tmp_path / 'unused'))


def test_nan_loss_names_the_step_and_keeps_the_checkpoint(tmp_path):
  _train(str(tmp_path), _train_config(num_steps=2))
  weights = _read(str(tmp_path), 'ClassPredictor/weights')
  config = _train_config(num_steps=10, debug_nan_loss_at_step=4)
  with pytest.raises(training_loop.NanLossError,
                     match=r'LossTensor is inf or nan\. Training stopped at global step 4;'):
    _train(str(tmp_path), config)
  # The last good checkpoint is still the latest one, untouched.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-2')
  np.testing.assert_array_equal(weights, _read(str(tmp_path), 'ClassPredictor/weights'))


class NanGradientModel(TinyDetectionModel):
  """Finite loss, NaN gradients: sqrt's gradient at 0 is inf, times 2x = 0 is NaN."""

  def loss(self, prediction_dict, true_image_shapes):
    losses = super().loss(prediction_dict, true_image_shapes)
    zeros = prediction_dict['boxes'] - tf.stop_gradient(prediction_dict['boxes'])
    losses['Loss/zero_norm'] = tf.sqrt(tf.reduce_sum(tf.square(zeros)))
    return losses


def test_nan_gradients_of_a_finite_loss_stop_before_they_are_applied(tmp_path):
  _train(str(tmp_path), _train_config(num_steps=2))
  before = {n: _read(str(tmp_path), n) for n in ('BoxPredictor/weights', 'ClassPredictor/weights')}
  with pytest.raises(training_loop.NanLossError,
                     match=r'Gradient global norm is inf or nan\. Training stopped at global '
                           r'step 2; variables were not updated'):
    trainer.train(
        create_tensor_dict_fn, lambda: NanGradientModel(NUM_CLASSES),
        _train_config(num_steps=10), master='', task=0, num_clones=1, worker_replicas=1,
        clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
        train_dir=str(tmp_path), session_config_override=test_util.session_config(num_cpus=1))
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-2')
  for name, value in before.items():
    np.testing.assert_array_equal(value, _read(str(tmp_path), name), err_msg=name)


def _copy_dir(source, target):
  shutil.copytree(source, target)
  return str(target)


def _one_step_deltas(tmp_path, **overrides):
  """Variables' change over one step from a shared start, with and without overrides."""
  base = str(tmp_path / 'base')
  start = _train_config(num_steps=1)
  start.optimizer.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.0
  _train(base, start, tensor_dict_fn=create_same_example_fn)
  names = ['BoxPredictor/weights', 'BoxPredictor/biases', 'ClassPredictor/biases',
           'FeatureExtractor/conv/biases', 'FeatureExtractor/conv/weights']
  before = {n: _read(base, n) for n in names}
  deltas = []
  for index, extra in enumerate(({}, overrides)):
    run_dir = _copy_dir(base, tmp_path / ('run%d' % index))
    _train(run_dir, _train_config(num_steps=2, **extra), tensor_dict_fn=create_same_example_fn)
    deltas.append({n: _read(run_dir, n) - before[n] for n in names})
  return deltas


def test_bias_multiplier_scales_only_the_bias_updates(tmp_path):
  plain, scaled = _one_step_deltas(tmp_path, bias_grad_multiplier=3.0)
  for name in plain:
    factor = 3.0 if name.endswith('/biases') else 1.0
    assert np.abs(plain[name]).max() > 0, name
    np.testing.assert_allclose(scaled[name], factor * plain[name], rtol=1e-4, atol=1e-7,
                               err_msg=name)


def test_gradient_clipping_by_norm_bounds_every_update(tmp_path):
  clip, learning_rate = 1e-3, 0.1
  plain, clipped = _one_step_deltas(tmp_path, gradient_clipping_by_norm=clip)
  assert any(np.linalg.norm(d) > 2 * learning_rate * clip for d in plain.values())
  for name, delta in clipped.items():
    # The deltas are differences of float32 variables, so each element carries
    # up to an ulp of the variable's magnitude, and the float32 update itself a
    # few ulps of the bound; allow that, nothing more.
    after = _read(str(tmp_path / 'run1'), name)
    rounding = np.sqrt(delta.size) * np.spacing(np.abs(after).max().astype(np.float32))
    assert np.linalg.norm(delta) <= learning_rate * clip * (1 + 1e-5) + rounding, name
    # Clipping rescales, it does not change the direction.
    cosine = np.sum(delta * plain[name]) / (
        np.linalg.norm(delta) * np.linalg.norm(plain[name]))
    assert cosine > 0.9999, name


@pytest.mark.parametrize('option', ['use_mixed_precision', 'use_xla'])
def test_speed_options_train_correctly_on_cpu(tmp_path, option):
  config = _train_config(num_steps=20, **{option: True})
  loss = _train(str(tmp_path), config)
  assert np.isfinite(loss)
  assert _read(str(tmp_path), 'global_step') == 20
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
  for name in reader.get_variable_to_shape_map():
    assert np.all(np.isfinite(reader.get_tensor(name))), name
  if option == 'use_mixed_precision':
    # The dynamic loss scale is part of the trained state.
    assert any('loss_scale' in n for n in reader.get_variable_to_shape_map())
    # ...and the process-global rewrite is switched off again afterwards.
    from tensorflow.python.training.experimental import mixed_precision_global_state
    assert not mixed_precision_global_state.is_mixed_precision_graph_rewrite_enabled()


def test_mixed_precision_reports_each_update_its_loss_scale_skipped(tmp_path):
  def create_model():
    model = TinyDetectionModel(NUM_CLASSES)
    plain_loss = model.loss
    model.loss = lambda *args: numerics.inject_inf_gradients(plain_loss(*args), at_run=4)
    return model
  with _capture_progress() as lines:
    trainer.train(create_tensor_dict_fn, create_model,
                  _train_config(num_steps=6, use_mixed_precision=True), master='', task=0,
                  num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
                  worker_job_name='worker', is_chief=True, train_dir=str(tmp_path),
                  session_config_override=test_util.session_config())
  # Runs 1-3 made global steps 1-3; run 4's update was skipped (the step stays
  # 3, the dynamic scale halves from its initial 2^15); runs 5-7 made 4-6.
  assert [line for line in lines if 'skipped' in line] == [
      'global step 3: mixed precision skipped this update (a gradient was inf or NaN at the '
      'loss scale used); the loss scale is now 16384; 1 update skipped so far']
  assert _read(str(tmp_path), 'global_step') == 6


def test_the_mixed_precision_rewrite_ends_with_the_block_even_after_an_error():
  # trainer.train and the CLI's build-once, run-per-session loop both use it.
  from tensorflow.python.training.experimental import mixed_precision_global_state
  with pytest.raises(tf.errors.UnavailableError):
    with trainer.mixed_precision_ends_with(_train_config(use_mixed_precision=True)):
      with tf.Graph().as_default():
        tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite(
            tf.compat.v1.train.GradientDescentOptimizer(0.1))
      assert mixed_precision_global_state.is_mixed_precision_graph_rewrite_enabled()
      raise tf.errors.UnavailableError(None, None, 'a lost ps')
  assert not mixed_precision_global_state.is_mixed_precision_graph_rewrite_enabled()


def test_use_xla_turns_on_the_global_jit_level():
  jit_level = lambda config: config.graph_options.optimizer_options.global_jit_level  # noqa: E731
  on = tf.compat.v1.OptimizerOptions.ON_1
  assert jit_level(trainer.session_config(_train_config(use_xla=True))) == on
  assert jit_level(trainer.session_config(_train_config())) != on
  # A caller's config (virtual CPU devices here) keeps its settings and gets XLA.
  base = test_util.session_config(num_cpus=2)
  config = trainer.session_config(_train_config(use_xla=True), base=base)
  assert jit_level(config) == on and config.device_count['CPU'] == 2
  assert jit_level(base) != on
  assert trainer.session_config(_train_config(), base=base) == base


def test_speed_options_lower_the_loss_like_the_default(tmp_path):
  # Every run starts from one checkpoint of freshly initialized model
  # variables (fine_tune_checkpoint; the loss scale of mixed precision starts
  # fresh) and trains on one fixed example, so the option's loss curve can be
  # laid over the default's step by step. Without a shared start each graph
  # draws its own initial values and the curves differ by far more than any
  # option does.
  start = str(tmp_path / 'start' / 'model.ckpt')
  with tf.Graph().as_default():
    TinyDetectionModel(NUM_CLASSES).predict(tf.zeros([1, 8, 8, 3]), None)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      start = tf.compat.v1.train.Saver().save(sess, start)
  losses = {}
  for option in ('default', 'use_mixed_precision', 'use_xla'):
    extra = {} if option == 'default' else {option: True}
    config = _train_config(num_steps=30, log_every_n_steps=1,
                           fine_tune_checkpoint=start,
                           fine_tune_checkpoint_type='detection', **extra)
    with _capture_progress() as lines:
      _train(str(tmp_path / option), config, tensor_dict_fn=create_same_example_fn)
    losses[option] = np.array(
        [float(l) for l in re.findall(r'loss = ([0-9.]+)', '\n'.join(lines))])
  default = losses['default']
  print('loss per step:', {k: v.tolist() for k, v in losses.items()})
  # The default itself learns (four runs, 2026-11-26: first loss 0.61-0.81,
  # last 0.022-0.080), or agreeing with it would prove nothing.
  assert len(default) >= 25 and default[-1] < 0.5 * default[0], default
  for option in ('use_mixed_precision', 'use_xla'):
    # On CPU both options leave the arithmetic as it is (the float16 rewrite
    # touches GPU ops only, the loss scale is a power of two, and XLA's CPU
    # auto-clustering needs TF_XLA_FLAGS), so a correct run logs the default's
    # losses exactly (measured: difference 0.0 at every step). The bound allows
    # the rounding of the logged four decimals and 2 % for an arithmetic that
    # differs in its last bits. The loss falls 5-20 % a step, so an option
    # that skips a single update is already 5 % off the default at step 30.
    assert len(losses[option]) == len(default), (option, losses[option], default)
    gap = np.abs(losses[option] - default)
    assert np.all(gap <= 0.02 * default + 2e-4), (option, gap.max(), losses[option], default)


def test_num_clones_minus_one_means_one_clone_on_cpu(tmp_path):
  assert trainer.resolve_num_clones(-1) == max(1, len(tf.config.list_physical_devices('GPU')))
  _train(str(tmp_path), _train_config(num_steps=2), num_clones=-1)
  assert _read(str(tmp_path), 'global_step') == 2
  with pytest.raises(ValueError, match='num_clones must be positive or -1'):
    trainer.resolve_num_clones(0)


def test_sync_replicas_with_two_clones_in_process(tmp_path):
  config = _train_config(num_steps=5, sync_replicas=True, replicas_to_aggregate=2)
  loss = _train(str(tmp_path), config, num_clones=2, num_cpus=2)
  assert np.isfinite(loss)
  assert _read(str(tmp_path), 'global_step') == 5


@contextlib.contextmanager
def _capture_progress():
  """Collects the messages absl logs while the block runs."""
  lines = []

  class Collect(logging.Handler):
    def emit(self, record):
      lines.append(record.getMessage())
  handler = Collect()
  verbosity = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.INFO)
  absl_logging.get_absl_logger().addHandler(handler)
  try:
    yield lines
  finally:
    absl_logging.get_absl_logger().removeHandler(handler)
    absl_logging.set_verbosity(verbosity)


def test_progress_lines_name_step_loss_rates_and_eta(tmp_path):
  with _capture_progress() as lines:
    _train(str(tmp_path), _train_config(num_steps=8, log_every_n_steps=2))
  progress = [l for l in lines if l.startswith('global step')]
  assert progress, lines
  pattern = (r'^global step (\d+), loss = [0-9.]+, [0-9.]+ steps/sec, '
             r'[0-9.]+ examples/sec, ETA \d+:\d\d:\d\d$')
  for line in progress:
    assert re.match(pattern, line), line
  assert 'training finished at global step 8' in lines


def test_cli_logs_tf_config_conflicts_and_chief_writes_pipeline_config(tmp_path):
  from tests import cluster_util
  from tests.trainer import cluster_testlib
  data = cluster_testlib.write_colour_records(str(tmp_path / 'data'), num_examples=8)
  config = cluster_testlib.write_pipeline_config(str(tmp_path), data, num_steps=1000)
  train_dir = str(tmp_path / 'train')
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    ps = cluster_testlib.start_task(group, cluster, 'ps', 0, config, train_dir)
    worker = cluster_testlib.start_task(
        group, cluster, 'worker', 0, config, train_dir,
        extra=['--task=3', '--worker_replicas=5', '--num_train_steps=3'])
    assert group.wait(worker, timeout=240) == 0, group.logs()
    assert group.wait(ps, timeout=120) == 0, group.logs()
  output = worker.output()
  assert 'TF_CONFIG wins over conflicting flags' in output
  assert '--task=3 (TF_CONFIG: 0)' in output
  assert '--worker_replicas=5 (TF_CONFIG: 1)' in output
  assert 'training finished at global step 3' in output
  written = os.path.join(train_dir, 'pipeline.config')
  assert 'slim_classifier' in open(written).read()

def _classifier_tensor_dict_fn(label_shape, label_value=1):
  """One 16x16 example of a 3-class classifier, its label scalar or of shape [1]."""
  def create():
    image = tf.random.uniform([16, 16, 3], 0, 255, dtype=tf.float32, seed=2)
    label = tf.fill(label_shape, tf.constant(label_value, tf.int64))
    return {fields.InputDataFields.image: image, fields.InputDataFields.label: label}
  return create


def _train_classifier(train_dir, label_shape, label_value=1, num_clones=1):
  from models import slim_classifier  # noqa: PLC0415
  return trainer.train(
      _classifier_tensor_dict_fn(label_shape, label_value),
      lambda: slim_classifier.SlimClassifier(True, 3, net='small_cnn', image_height=16,
                                             image_width=16),
      _train_config(num_steps=2), master='', task=0, num_clones=num_clones,
      worker_replicas=1, clone_on_cpu=True, ps_tasks=0, worker_job_name='worker',
      is_chief=True, train_dir=train_dir,
      session_config_override=test_util.session_config(num_cpus=num_clones))


@pytest.mark.parametrize('label_shape', [[], [1]])
def test_classifier_labels_batched_with_one_range_check_per_clone(tmp_path, label_shape):
  captured = {}
  original = trainer._create_classification_losses

  def capture(model, read_data_list):
    result = original(model, read_data_list)
    captured['graph'] = tf.compat.v1.get_default_graph()
    return result

  trainer._create_classification_losses = capture
  try:
    loss = _train_classifier(str(tmp_path), label_shape, num_clones=2)
  finally:
    trainer._create_classification_losses = original
  assert np.isfinite(loss)
  asserts = [op.name for op in captured['graph'].get_operations()
             if re.search(r'check_label(_\d+)?/AssertGuard$', op.name)]
  # Per step, each clone checks its label vector once (not once per example).
  assert len(asserts) == 2, asserts


def test_classifier_label_above_num_classes_stops_training(tmp_path):
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='label has a class id outside 1..num_classes=3'):
    _train_classifier(str(tmp_path), [], label_value=4)


@pytest.mark.parametrize('is_chief', [False, True], ids=['worker', 'chief'])
def test_startup_delay_steps_hold_a_workers_first_step_until_the_global_step_reaches_it(
    is_chief):
  # tf-slim's startup_delay_steps, done by the runner (so the session-start
  # deadline sees the wait's progress); the chief never waits.
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    own_step = tf.compat.v1.assign_add(global_step, 1)
    others_step = tf.compat.v1.assign_add(global_step, 1)
    runner = training_loop.TrainStepRunner(number_of_steps=100, is_chief=is_chief,
                                           log_every_n_steps=0, startup_delay_steps=3)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      go = threading.Event()

      def other_workers():
        go.wait()
        for _ in range(3):
          time.sleep(0.2)
          sess.run(others_step)
      others = threading.Thread(target=other_workers, daemon=True)
      others.start()
      if not is_chief:
        go.set()
      step_seen, should_stop = runner(sess, own_step, global_step, {})
      go.set()
      others.join(10)
  assert not should_stop
  # The worker's own step ran after the three others; the chief's ran first.
  assert step_seen == (4 if not is_chief else 1)


def test_runner_step_errors_name_the_failing_op_as_session_run_does():
  # The runner's step runs through a callable; its errors must still carry
  # the failing op and where it was created, as Session.run's do.
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    with tf.control_dependencies([tf.debugging.Assert(
        False, ['the step failed on purpose'], name='failing_check')]):
      train_op = tf.compat.v1.assign_add(global_step, 1)
    runner = training_loop.TrainStepRunner(number_of_steps=10, log_every_n_steps=0)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with pytest.raises(tf.errors.InvalidArgumentError,
                         match='the step failed on purpose') as raised:
        runner(sess, train_op, global_step, {})
  assert raised.value.op is not None and raised.value.op.name == 'failing_check/Assert'
  assert 'Detected at node' in raised.value.message
  assert 'test_trainer.py' in raised.value.message


def test_runner_steps_on_after_its_session_is_replaced():
  # A recovered task gets a new session from the Supervisor; the runner's
  # per-session callable must follow it.
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.assign_add(global_step, 1)
    with tf.control_dependencies([train_op]):
      step_after_update = global_step.read_value()
    runner = training_loop.TrainStepRunner(number_of_steps=10, log_every_n_steps=0,
                                           step_after_update=step_after_update)
    with tf.compat.v1.Session() as first:
      first.run(tf.compat.v1.global_variables_initializer())
      assert runner(first, train_op, global_step, {}) == (1, False)
    with tf.compat.v1.Session() as second:
      second.run(global_step.assign(5))
      assert runner(second, train_op, global_step, {}) == (6, False)
  assert runner.last_step == 6


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
