"""The two-stage configs of configs/zoo/ fine-tune from a zoo checkpoint as a user's would.

Each (faster_rcnn_*, mask_rcnn_*, rfcn_*) fine-tunes with the legacy trainer
on the shapes data (3 classes, with instance masks for Mask R-CNN), one image
per clone at its own size, after restoring a checkpoint written in the zoo's
layout (random values under the names and shapes the OD API gives the sample
config of that name, tests/models/data/). The step runs with a zero learning
rate, so the trained checkpoint shows what was restored: every variable whose
shape does not depend on num_classes equals the zoo checkpoint's value; the
class-dependent second-stage layers start fresh, as in the OD API.
test_zoo_two_stage_layout.py checks the layouts of all 27 sample configs.
"""

import glob
import os

from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_v1

from builders import model_builder
from core import config_util
from core import fine_tune
from deployment import model_deploy
from protos import model_pb2
from tests.models import zoo_testlib
from tests.models import zoo_two_stage_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCHITECTURES = zoo_two_stage_testlib.TWO_STAGE_ARCHITECTURES
TWO_STAGE_CONFIGS = sorted(
    path for path in glob.glob(os.path.join(REPO_ROOT, 'configs', 'zoo', '*.config'))
    if os.path.basename(path).startswith(('faster_rcnn', 'mask_rcnn', 'rfcn')))
pytestmark = pytest.mark.slow
# The fixed-size (NASNet) config trains at this size.
_FIXED_SIZE = 96


def _name(path):
  return os.path.basename(path)[:-len('.config')]


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
  return create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path_factory.mktemp('shapes')), num_train=4, num_val=0, height=80, width=96,
      num_shards=1, instance_masks=True)


def _small_configs(path, data, checkpoint):
  """The config at a small size: keep_aspect_ratio 64..96 (fixed 96 where fixed), few proposals."""
  configs = config_util.get_configs_from_pipeline_file(path)
  frcnn = configs['model'].faster_rcnn
  resizer = frcnn.image_resizer
  if resizer.HasField('keep_aspect_ratio_resizer'):
    resizer.keep_aspect_ratio_resizer.min_dimension = 64
    resizer.keep_aspect_ratio_resizer.max_dimension = 96
  else:
    resizer.fixed_shape_resizer.height = resizer.fixed_shape_resizer.width = _FIXED_SIZE
  frcnn.first_stage_max_proposals = 16
  frcnn.second_stage_batch_size = 8
  nms = frcnn.second_stage_post_processing.batch_non_max_suppression
  nms.max_detections_per_class = nms.max_total_detections = 8
  return zoo_testlib.train_one_step_from(configs, data, checkpoint)


@pytest.mark.parametrize('path', TWO_STAGE_CONFIGS, ids=[_name(p) for p in TWO_STAGE_CONFIGS])
def test_two_stage_config_fine_tunes_from_a_zoo_checkpoint(path, shapes_data, tmp_path):
  checkpoint = str(tmp_path / 'zoo' / 'model.ckpt')
  configs = _small_configs(path, shapes_data, checkpoint)
  assert configs['model'].faster_rcnn.num_classes == 3
  zoo_values = zoo_testlib.write_zoo_layout_checkpoint(_name(path) + '.config', checkpoint)

  train_dir = str(tmp_path / 'train')
  loss = zoo_testlib.train_with_legacy_trainer(configs, train_dir)
  assert np.isfinite(loss)

  trained = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert trained.get_tensor('global_step') == 1
  shapes = trained.get_variable_to_shape_map()
  # The OD API's NASNet creates a step counter inside its first cell when the
  # graph has none (as when its variable list was taken); under the trainer
  # it uses the graph's global_step.
  zoo_values = {name: value for name, value in zoo_values.items()
                if not name.endswith('/global_step')}
  class_dependent = sorted(name for name, value in zoo_values.items()
                           if list(shapes[name]) != list(value.shape))
  # Only the second stage's class layers depend on num_classes.
  assert class_dependent
  assert all(name.startswith('SecondStageBoxPredictor/') for name in class_dependent)
  changed = [name for name, value in zoo_values.items()
             if name not in class_dependent
             and not np.array_equal(trained.get_tensor(name), value)]
  assert changed == []


def test_two_images_of_different_sizes_train_as_one_padded_batch(tmp_path):
  """batch_size 2 with keep_aspect_ratio_resizer: two sizes, padded to one batch."""
  wide = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'wide'), num_train=1, num_val=0, height=64, width=96, num_shards=1)
  tall = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'tall'), num_train=1, num_val=0, height=96, width=64, num_shards=1,
      seed=1)
  checkpoint = str(tmp_path / 'zoo' / 'model.ckpt')
  path = os.path.join(REPO_ROOT, 'configs', 'zoo', 'faster_rcnn_resnet50_coco.config')
  configs = _small_configs(path, wide, checkpoint)
  configs['train_config'].batch_size = 2
  configs['train_config'].ClearField('fine_tune_checkpoint')
  train_input = configs['train_input_config']
  train_input.tf_record_input_reader.input_path.append(tall['train_pattern'])
  # In file order, so the one batch holds a 64x96 and a 96x64 image (resized
  # to 64x96 and 96x64, padded to 96x96).
  train_input.shuffle = False
  train_input.num_readers = 1
  train_dir = str(tmp_path / 'train')
  loss = zoo_testlib.train_with_legacy_trainer(configs, train_dir)
  assert np.isfinite(loss)
  assert tf.train.load_checkpoint(train_dir).get_tensor('global_step') == 1


def test_two_clones_over_two_ps_tasks_keep_the_zoo_names():
  """model_deploy's placement with a two-stage zoo model: one set of variables, on the ps."""
  name = 'faster_rcnn_resnet50_coco'
  model_config = text_format.Parse(
      zoo_two_stage_testlib.faster_rcnn_model_config(ARCHITECTURES[name], image_size=64,
                                                     max_proposals=8),
      model_pb2.DetectionModel())

  def clone_fn():
    model = model_builder.build(model_config, is_training=True, add_summaries=False)
    images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])], [tf.one_hot([0], 90)])
    for loss in model.loss(model.predict(images, shapes), shapes).values():
      tf.compat.v1.losses.add_loss(loss)

  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True, num_ps_tasks=2,
                                           worker_job_name='worker', ps_job_name='ps')
    clones = model_deploy.create_clones(config, clone_fn)
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
    clone_losses = [tf.compat.v1.losses.get_losses(clone.scope) for clone in clones]
  assert len(clones) == 2 and all(len(losses) == 4 for losses in clone_losses)
  assert zoo_testlib.layout_difference(
      zoo_testlib.reference_variables(name + '.config'),
      {name: v.shape.as_list() for name, v in variables.items()}) == ''
  devices = {v.device for v in variables.values()}
  assert devices == {'/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0'}


def test_classification_checkpoint_restores_both_stages_of_the_backbone(tmp_path):
  """`fine_tune_checkpoint_type: classification` from slim's resnet_v1_50 classifier."""
  checkpoint = str(tmp_path / 'resnet_v1_50' / 'model.ckpt')
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(3)
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
      resnet_v1.resnet_v1_50(tf.zeros([1, 64, 64, 3]), num_classes=1000, is_training=False)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(sess, checkpoint)
  configs = config_util.get_configs_from_pipeline_file(
      os.path.join(REPO_ROOT, 'configs', 'zoo', 'faster_rcnn_resnet50_coco.config'))
  train_config = configs['train_config']
  train_config.fine_tune_checkpoint = checkpoint
  train_config.fine_tune_checkpoint_type = 'classification'
  with tf.Graph().as_default():
    model = model_builder.build(configs['model'], is_training=True, add_summaries=False)
    images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])], [tf.one_hot([0], 3)])
    model.predict(images, shapes)
    init_fn = fine_tune.build_init_fn(model, train_config)
    second_stage = [v for v in tf.compat.v1.global_variables()
                    if v.op.name.startswith('SecondStageFeatureExtractor/')]
    first_stage = [v for v in tf.compat.v1.global_variables()
                   if v.op.name.startswith('FirstStageFeatureExtractor/resnet_v1_50/block')
                   and '/block4/' not in v.op.name]
    heads = [v for v in tf.compat.v1.global_variables()
             if v.op.name.startswith(('Conv/', 'FirstStageBoxPredictor/',
                                      'SecondStageBoxPredictor/'))]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      init_fn(sess)
      restored = sess.run({v.op.name: v for v in second_stage + first_stage})
  reader = tf.train.load_checkpoint(checkpoint)
  # Blocks 1-3 from the first stage, block 4 (the per-proposal head) from the
  # second: every classifier weight but the logits reaches the detector.
  assert len(first_stage) > 200 and len(second_stage) == 50
  for name, value in restored.items():
    assert np.array_equal(value, reader.get_tensor(name.split('/', 1)[1])), name
  assert heads and not any(reader.has_tensor(v.op.name) for v in heads)


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__]))
