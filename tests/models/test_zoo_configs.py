"""Our configs of the zoo's shapes (configs/zoo/) fine-tune as a user's would.

For each config: it parses, the model builds, and the legacy trainer runs a
training step on the shapes data (3 classes) at a small image size after
restoring a checkpoint written in the zoo's variable layout (no downloads:
random values under the names and shapes the OD API gives the sample config
of that architecture, tests/models/data/). The step runs with a zero learning
rate, so the trained checkpoint shows what was restored: every trainable
variable equals the zoo checkpoint's value except the class predictor, which
has another shape there (the zoo's num_classes) and starts fresh, as in the
OD API.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from builders import model_builder
from core import config_util
from core import fine_tune
from deployment import model_deploy
from models import mobilenet_v1
from tests.models import zoo_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The SSDs; the two-stage configs (faster_rcnn_*, mask_rcnn_*, rfcn_*) have
# their own test, test_zoo_two_stage.py.
ZOO_CONFIGS = sorted(
    path for path in glob.glob(os.path.join(REPO_ROOT, 'configs', 'zoo', '*.config'))
    if 'ssd' in os.path.basename(path))
# The sample config of each of our configs' architecture.
_SAMPLE_CONFIG = {
    'embedded_ssd_mobilenet_v1_256x256': 'embedded_ssd_mobilenet_v1_coco',
    'ssd_inception_v2_coco': 'ssd_inception_v2_coco',
    'ssd_inception_v3': 'ssd_inception_v3_pets',
    'ssd_mobilenet_v1_coco': 'ssd_mobilenet_v1_coco',
    'ssd_mobilenet_v1_fpn_640x640':
        'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync',
    'ssd_mobilenet_v1_ppn_300x300':
        'ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync',
    'ssd_mobilenet_v2_coco': 'ssd_mobilenet_v2_coco',
    'ssd_mobilenet_v2_fullyconv': 'ssd_mobilenet_v2_fullyconv_coco',
    'ssd_mobilenet_v2_fpnlite_256x256':
        'ssd_mobilenet_v2_fpnlite_quantized_shared_box_predictor_256x256_'
        'depthmultiplier_75_coco14_sync',
    'ssd_mobilenet_v2_mnasfpn_320x320':
        'ssd_mobilenet_v2_mnasfpn_shared_box_predictor_320x320_coco_sync',
    'ssd_resnet50_v1_fpn_640x640':
        'ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco14_sync',
    'ssdlite_mobiledet_cpu_320x320': 'ssdlite_mobiledet_cpu_320x320_coco_sync_4x4',
    'ssdlite_mobilenet_edgetpu_320x320': 'ssdlite_mobilenet_edgetpu_320x320_coco',
    'ssdlite_mobilenet_v2_coco': 'ssdlite_mobilenet_v2_coco',
    'ssdlite_mobilenet_v3_large_320x320': 'ssdlite_mobilenet_v3_large_320x320_coco',
    'ssdlite_mobilenet_v3_small_320x320': 'ssdlite_mobilenet_v3_small_320x320_coco',
}
# Small training sizes: the smallest each extractor takes (FPN to level 7 needs 128).
_SIZES = {'embedded_ssd_mobilenet_v1_256x256': 256, 'ssd_resnet50_v1_fpn_640x640': 160}
_DEFAULT_SIZE = 128
# Two clones on two virtual CPU devices for one family (model_deploy's path).
_CLONES = {'ssdlite_mobilenet_v3_small_320x320': 2}


def _name(path):
  return os.path.basename(path)[:-len('.config')]


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
  return create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path_factory.mktemp('shapes')), num_train=4, num_val=0, height=96, width=96,
      num_shards=1)


def _small_configs(path, data, checkpoint):
  configs = config_util.get_configs_from_pipeline_file(path)
  size = _SIZES.get(_name(path), _DEFAULT_SIZE)
  resizer = configs['model'].ssd.image_resizer
  if resizer.HasField('keep_aspect_ratio_resizer'):
    # Images keep their aspect ratio (fullyconv): the shapes data's 96x96 become 64x64.
    resizer.keep_aspect_ratio_resizer.min_dimension = size // 2
    resizer.keep_aspect_ratio_resizer.max_dimension = size
  else:
    resizer.fixed_shape_resizer.height, resizer.fixed_shape_resizer.width = size, size
  configs['train_config'].batch_size = 2
  return zoo_testlib.train_one_step_from(configs, data, checkpoint)


@pytest.mark.parametrize('path', ZOO_CONFIGS, ids=[_name(p) for p in ZOO_CONFIGS])
def test_zoo_config_fine_tunes_from_a_zoo_checkpoint(path, shapes_data, tmp_path):
  checkpoint = str(tmp_path / 'zoo' / 'model.ckpt')
  configs = _small_configs(path, shapes_data, checkpoint)
  assert configs['model'].ssd.num_classes == 3
  zoo_values = zoo_testlib.write_zoo_layout_checkpoint(_SAMPLE_CONFIG[_name(path)] + '.config',
                                                       checkpoint)

  train_dir = str(tmp_path / 'train')
  num_clones = _CLONES.get(_name(path), 1)
  loss = zoo_testlib.train_with_legacy_trainer(configs, train_dir, num_clones=num_clones)
  assert np.isfinite(loss)

  trained = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert trained.get_tensor('global_step') == 1
  restored = [name for name, value in zoo_values.items()
              if not zoo_testlib.is_class_head(name)
              and np.array_equal(trained.get_tensor(name), value)]
  # Batch-norm statistics are restored too; the training step moves them.
  class_heads = [name for name in zoo_values if zoo_testlib.is_class_head(name)]
  assert class_heads
  assert len(restored) == len(zoo_values) - len(class_heads)
  for name in class_heads:
    assert trained.get_tensor(name).shape[-1] != zoo_values[name].shape[-1], name


def test_classification_checkpoint_restores_the_base_network(tmp_path):
  """`fine_tune_checkpoint_type: classification` from a mobilenet_v1 classifier checkpoint."""
  checkpoint = str(tmp_path / 'mobilenet_v1' / 'model.ckpt')
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(2)
    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope()):
      mobilenet_v1.mobilenet_v1(tf.zeros([1, 128, 128, 3]), num_classes=1001)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(sess, checkpoint)
  configs = config_util.get_configs_from_pipeline_file(
      os.path.join(REPO_ROOT, 'configs', 'zoo', 'ssd_mobilenet_v1_coco.config'))
  train_config = configs['train_config']
  train_config.fine_tune_checkpoint = checkpoint
  train_config.fine_tune_checkpoint_type = 'classification'
  with tf.Graph().as_default():
    model = model_builder.build(configs['model'], is_training=True, add_summaries=False)
    images, shapes = model.preprocess(tf.zeros([1, 128, 128, 3]))
    model.predict(images, shapes)
    init_fn = fine_tune.build_init_fn(model, train_config)
    backbone = [v for v in tf.compat.v1.global_variables()
                if v.op.name.startswith('FeatureExtractor/MobilenetV1/Conv2d_')
                and '_Conv2d_' not in v.op.name]
    extra_layers = [v for v in tf.compat.v1.global_variables()
                    if '_Conv2d_' in v.op.name]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      init_fn(sess)
      restored = sess.run({v.op.name: v for v in backbone + extra_layers})
  reader = tf.train.load_checkpoint(checkpoint)
  # Every base-network variable (weights and batch norm of Conv2d_0..13) from
  # the checkpoint's MobilenetV1/...; the SSD's extra layers start fresh.
  assert len(backbone) == 135
  for name in (v.op.name for v in backbone):
    assert np.array_equal(restored[name],
                          reader.get_tensor(name[len('FeatureExtractor/'):])), name
  assert extra_layers
  assert not any(reader.has_tensor(v.op.name[len('FeatureExtractor/'):])
                 for v in extra_layers)


def test_two_clones_over_two_ps_tasks_keep_the_zoo_names():
  """model_deploy's placement with a zoo model: one set of variables, on the ps tasks."""
  configs = config_util.get_configs_from_pipeline_file(
      os.path.join(REPO_ROOT, 'configs', 'zoo', 'ssd_mobilenet_v1_coco.config'))
  model_config = configs['model']
  model_config.ssd.num_classes = 90

  def clone_fn():
    model = model_builder.build(model_config, is_training=True, add_summaries=False)
    images, shapes = model.preprocess(tf.zeros([1, 128, 128, 3]))
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])], [tf.one_hot([0], 90)])
    for loss in model.loss(model.predict(images, shapes), shapes).values():
      tf.compat.v1.losses.add_loss(loss)

  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True, num_ps_tasks=2,
                                           worker_job_name='worker', ps_job_name='ps')
    clones = model_deploy.create_clones(config, clone_fn)
    variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
  assert len(clones) == 2
  expected = zoo_testlib.reference_variables('ssd_mobilenet_v1_coco.config')
  assert zoo_testlib.layout_difference(
      expected, {name: v.shape.as_list() for name, v in variables.items()}) == ''
  devices = {v.device for v in variables.values()}
  assert devices == {'/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0'}


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__]))
