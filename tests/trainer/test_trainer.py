"""Tests for trainer.trainer.train() with small real models on CPU devices.

Its updates (NaN stops, gradient surgery, the speed options) are tested in
test_trainer_updates.py; both train tests/trainer/trainer_testlib's detector.
"""

import os
import re
import signal
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from core import standard_fields as fields
from deployment import fault_runtime
from tests import test_util
from tests.trainer import trainer_testlib as lib
from trainer import trainer
from trainer import training_loop

tf.compat.v1.disable_eager_execution()


def test_trains_one_clone_and_checkpoints_the_last_step(tmp_path):
  loss = lib.train(str(tmp_path), lib.train_config())
  assert np.isfinite(loss)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-6')
  assert os.path.exists(os.path.join(str(tmp_path), 'checkpoint'))


def test_trains_two_clones(tmp_path):
  lib.train(str(tmp_path), lib.train_config(), num_clones=2, num_cpus=2)
  assert lib.read(str(tmp_path), 'global_step') == 6


def test_more_clones_than_gpus_without_clone_on_cpu_is_an_error(tmp_path):
  num_gpus = len(tf.config.list_physical_devices('GPU'))
  with pytest.raises(ValueError, match='num_clones=%d needs one GPU per clone, but %d GPU' % (
      num_gpus + 2, num_gpus)):
    trainer.train(
        lib.create_tensor_dict_fn, lambda: lib.TinyDetectionModel(lib.NUM_CLASSES),
        lib.train_config(batch_size=4 * (num_gpus + 2)), master='', task=0,
        num_clones=num_gpus + 2, worker_replicas=1, clone_on_cpu=False, ps_tasks=0,
        worker_job_name='worker', is_chief=True, train_dir=str(tmp_path))
  assert not tf.io.gfile.glob(os.path.join(str(tmp_path), 'model.ckpt*'))


def test_record_class_id_above_num_classes_stops_training(tmp_path):
  def tensor_dict_with_class_3():
    tensor_dict = lib.create_tensor_dict_fn()
    tensor_dict[fields.InputDataFields.groundtruth_classes] = tf.constant([3], tf.int64)
    return tensor_dict

  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='groundtruth_classes has a class id outside 1..num_classes=2'):
    trainer.train(
        tensor_dict_with_class_3, lambda: lib.TinyDetectionModel(lib.NUM_CLASSES),
        lib.train_config(),
        master='', task=0, num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
        worker_job_name='worker', is_chief=True, train_dir=str(tmp_path),
        session_config_override=test_util.session_config(num_cpus=1))


def test_batch_not_divisible_by_clones_is_an_error(tmp_path):
  with pytest.raises(ValueError, match='batch_size=4 is not divisible by num_clones=3'):
    lib.train(str(tmp_path), lib.train_config(), num_clones=3)


def test_freeze_keeps_frozen_variables_unchanged(tmp_path):
  first = tmp_path / 'first'
  lib.train(str(first), lib.train_config(num_steps=1))
  before = lib.read(str(first), 'BoxPredictor/weights')
  lib.train(str(first), lib.train_config(num_steps=5, freeze_variables=['BoxPredictor']))
  np.testing.assert_array_equal(before, lib.read(str(first), 'BoxPredictor/weights'))
  assert lib.read(str(first), 'global_step') == 5


def test_fine_tune_restores_model_variables_but_not_the_global_step(tmp_path):
  source, target = str(tmp_path / 'source'), str(tmp_path / 'target')
  lib.train(source, lib.train_config(num_steps=3))
  config = lib.train_config(num_steps=1, fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         fine_tune_checkpoint_type='detection')
  config.optimizer.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.0
  lib.train(target, config)
  assert lib.read(target, 'global_step') == 1
  for name in ('BoxPredictor/weights', 'FeatureExtractor/conv/weights'):
    np.testing.assert_array_equal(lib.read(source, name), lib.read(target, name))


class _RecordingModel(lib.TinyDetectionModel):
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
  lib.train(source, lib.train_config(num_steps=1))
  config = lib.train_config(fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         from_detection_checkpoint=from_detection)
  before = config.SerializeToString()
  with tf.Graph().as_default():
    model = _RecordingModel(lib.NUM_CLASSES)
    model.predict(tf.zeros([1, 8, 8, 3]), None)
    assert trainer.build_init_fn(model, config) is not None
  assert model.asked_type == expected
  assert config.SerializeToString() == before
  assert not config.HasField('fine_tune_checkpoint_type')


def test_build_training_graph_then_run_training_is_train(tmp_path):
  config = lib.train_config(num_steps=3)
  graph = trainer.build_training_graph(
      lib.create_tensor_dict_fn, lambda: lib.TinyDetectionModel(lib.NUM_CLASSES), config, task=0,
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
  assert lib.read(str(tmp_path), 'global_step') == 3


def test_train_takes_its_run_settings_as_one_object(tmp_path):
  settings = trainer.TrainSettings(
      train_dir=str(tmp_path / 'unused'), num_clones=2, clone_on_cpu=True,
      session_config_override=test_util.session_config(num_cpus=2))
  # An argument given to train() overrides the object's field.
  loss = trainer.train(lib.create_tensor_dict_fn, lambda: lib.TinyDetectionModel(lib.NUM_CLASSES),
                       lib.train_config(num_steps=2), train_dir=str(tmp_path), settings=settings)
  assert np.isfinite(loss)
  assert lib.read(str(tmp_path), 'global_step') == 2
  assert not os.path.exists(str(tmp_path / 'unused'))


def test_num_clones_minus_one_means_one_clone_on_cpu(tmp_path):
  assert trainer.resolve_num_clones(-1) == max(1, len(tf.config.list_physical_devices('GPU')))
  lib.train(str(tmp_path), lib.train_config(num_steps=2), num_clones=-1)
  assert lib.read(str(tmp_path), 'global_step') == 2
  with pytest.raises(ValueError, match='num_clones must be positive or -1'):
    trainer.resolve_num_clones(0)


def test_sync_replicas_with_two_clones_in_process(tmp_path):
  config = lib.train_config(num_steps=5, sync_replicas=True, replicas_to_aggregate=2)
  loss = lib.train(str(tmp_path), config, num_clones=2, num_cpus=2)
  assert np.isfinite(loss)
  assert lib.read(str(tmp_path), 'global_step') == 5


def test_progress_lines_name_step_loss_rates_and_eta(tmp_path):
  with lib.capture_progress() as lines:
    lib.train(str(tmp_path), lib.train_config(num_steps=8, log_every_n_steps=2))
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
      lib.train_config(num_steps=2), master='', task=0, num_clones=num_clones,
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


class _SignalsItselfWhenCollected(object):
  """Sends this process SIGTERM from its `__del__`, where a Python signal handler's
  exception is printed and dropped (as in any of TensorFlow's `__del__` methods)."""

  def __del__(self):
    os.kill(os.getpid(), signal.SIGTERM)
    sum(range(100))  # Bytecodes: the handler runs here, inside __del__.


@pytest.mark.filterwarnings('ignore::pytest.PytestUnraisableExceptionWarning')  # the lost raise
def test_a_sigterm_lost_before_the_loop_stops_a_worker_before_its_first_step():
  # CI, 2026-11-28: a joiner removed while it built its graph trained on for good.
  faults = fault_runtime.TaskFaults()
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.assign_add(global_step, 1)
    with faults.leaving_on_sigterm():
      # The raise of the early handler is lost; the process goes on.
      _SignalsItselfWhenCollected()  # Collected at once: its __del__ signals.
      runner = training_loop.TrainStepRunner(number_of_steps=10, is_chief=False,
                                             faults=faults, log_every_n_steps=0)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with runner.handle_sigterm():
          loss, should_stop = runner(sess, train_op, global_step, {})
        assert sess.run(global_step) == 0  # It never stepped.
  assert should_stop and np.isnan(loss)
  with pytest.raises(fault_runtime.TrainingPreempted,
                     match=r'SIGTERM before the first training step of this worker: leaving '
                           r'the job \(global step 0\)') as raised:
    runner.raise_if_preempted()
  assert raised.value.code == 143


def test_a_leaving_worker_says_it_left_once_as_its_loop_stops_with_its_session_open():
  # 2026-11-28, loopback churn: a leaver's session close waited out the whole grace, and
  # the chief, told only after the close, counted the gone worker for 15 s.
  faults = fault_runtime.TaskFaults()
  told = []
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.assign_add(global_step, 1)
    with faults.leaving_on_sigterm(say_left=lambda: told.append(sess._closed)):
      runner = training_loop.TrainStepRunner(number_of_steps=10, is_chief=False,
                                             faults=faults, log_every_n_steps=0)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        assert runner(sess, train_op, global_step, {}) == (1, False)
        assert told == []  # Training is no leave.
        runner.request_preemption()
        assert runner(sess, train_op, global_step, {}) == (2, True)
        assert told == [False]  # Told while the session was still open.
  faults.leave()  # As train.py's exit path does: already told, not again.
  assert told == [False]
  with pytest.raises(fault_runtime.TrainingPreempted):
    runner.raise_if_preempted()


def _signalled_inside_a_c_call():
  """SIGTERM whose raise TensorFlow's C++ turns into a bare TypeError (nest.flatten does)."""
  try:
    os.kill(os.getpid(), signal.SIGTERM)
    sum(range(100))  # Bytecodes: the handler runs here.
  except fault_runtime.TrainingPreempted:
    raise TypeError from None


def test_a_sigterm_that_surfaces_as_another_error_still_makes_the_worker_leave():
  # 2026-11-28: a joiner signalled while tracing its input pipeline exited 1 (TypeError).
  faults = fault_runtime.TaskFaults()
  with pytest.raises(fault_runtime.TrainingPreempted,
                     match=r'SIGTERM before the first training step of this worker: leaving '
                           r'the job \(the signal interrupted TypeError') as raised:
    with faults.leaving_on_sigterm():
      _signalled_inside_a_c_call()
  assert raised.value.code == 143 and isinstance(raised.value.__cause__, TypeError)
  # Without the signal an error is the error.
  with pytest.raises(TypeError, match='not a leave'):
    with fault_runtime.TaskFaults().leaving_on_sigterm():
      raise TypeError('not a leave')


def test_a_worker_stopped_in_its_loop_before_its_first_step_takes_that_step_first():
  # Only a joiner removed before its loop began leaves without a step: a worker of a
  # job stopped as a whole still delivers the step its sync chief may be waiting for.
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    train_op = tf.compat.v1.assign_add(global_step, 1)
    runner = training_loop.TrainStepRunner(number_of_steps=10, is_chief=False,
                                           faults=fault_runtime.TaskFaults(),
                                           log_every_n_steps=0)
    runner.request_preemption()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      _, should_stop = runner(sess, train_op, global_step, {})
      assert should_stop and sess.run(global_step) == 1
  with pytest.raises(fault_runtime.TrainingPreempted, match='training preempted by SIGTERM at'):
    runner.raise_if_preempted()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
