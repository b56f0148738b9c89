"""The ResNet v1 and Inception v2 two-stage extractors create the zoo checkpoints' variables.

For every OD API two-stage sample config whose feature extractor is
faster_rcnn_resnet50/101/152 or faster_rcnn_inception_v2, the variables under
`FirstStageFeatureExtractor/` and `SecondStageFeatureExtractor/` (names and
shapes) must equal what the OD API builds (tests/models/zoo_testlib.py), so
the zoo checkpoints restore completely. Also checked: feature shapes and
strides, preprocessing by hand, a real forward pass, gradients, frozen batch
norm, and the names a slim classification checkpoint is read with.

The big networks are only constructed (no session); the first stage sees a
64x64 image and the second stage 7x7 crops (the zoo's 14x14 crops after its
2x2 max-pool).
"""

import functools
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v2
from tf_slim.nets import resnet_v1

from models import faster_rcnn_inception_v2_feature_extractor as inception_extractor
from models import faster_rcnn_resnet_v1_feature_extractors as resnet_extractors
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

FIRST, SECOND = 'FirstStageFeatureExtractor', 'SecondStageFeatureExtractor'
IMAGE_SIZE = 64
CROP_SIZE = 7

_EXTRACTORS = {
    'faster_rcnn_resnet50': (resnet_extractors.FasterRCNNResnet50FeatureExtractor, 1024, 2048),
    'faster_rcnn_resnet101': (resnet_extractors.FasterRCNNResnet101FeatureExtractor, 1024,
                              2048),
    'faster_rcnn_resnet152': (resnet_extractors.FasterRCNNResnet152FeatureExtractor, 1024,
                              2048),
    'faster_rcnn_inception_v2': (inception_extractor.FasterRCNNInceptionV2FeatureExtractor, 576,
                                 1024),
}

# Each sample config's feature_extractor type and first_stage_features_stride.
_CONFIGS = {
    'faster_rcnn_resnet50_coco.config': ('faster_rcnn_resnet50', 16),
    'faster_rcnn_resnet50_fgvc.config': ('faster_rcnn_resnet50', 16),
    'faster_rcnn_resnet50_pets.config': ('faster_rcnn_resnet50', 16),
    'mask_rcnn_resnet50_atrous_coco.config': ('faster_rcnn_resnet50', 8),
    'faster_rcnn_resnet101_atrous_coco.config': ('faster_rcnn_resnet101', 8),
    'faster_rcnn_resnet101_ava_v2.1.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet101_coco.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet101_fgvc.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet101_kitti.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet101_pets.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet101_voc07.config': ('faster_rcnn_resnet101', 16),
    'mask_rcnn_resnet101_atrous_coco.config': ('faster_rcnn_resnet101', 8),
    'mask_rcnn_resnet101_pets.config': ('faster_rcnn_resnet101', 16),
    'rfcn_resnet101_coco.config': ('faster_rcnn_resnet101', 16),
    'rfcn_resnet101_pets.config': ('faster_rcnn_resnet101', 16),
    'faster_rcnn_resnet152_coco.config': ('faster_rcnn_resnet152', 16),
    'faster_rcnn_resnet152_pets.config': ('faster_rcnn_resnet152', 16),
    'faster_rcnn_inception_v2_coco.config': ('faster_rcnn_inception_v2', 16),
    'faster_rcnn_inception_v2_pets.config': ('faster_rcnn_inception_v2', 16),
    'mask_rcnn_inception_v2_coco.config': ('faster_rcnn_inception_v2', 16),
}


class _Model:
  """One extractor's two stages built in a graph of their own."""

  def __init__(self, extractor_type, stride, dynamic_image=False):
    extractor_class, self.rpn_depth, self.box_depth = _EXTRACTORS[extractor_type]
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.compat.v1.set_random_seed(0)
      self.extractor = extractor_class(is_training=True, first_stage_features_stride=stride)
      side = None if dynamic_image else IMAGE_SIZE
      self.images = tf.compat.v1.placeholder(tf.float32, [1, side, side, 3])
      self.rpn_features, self.endpoints = self.extractor.extract_proposal_features(
          self.extractor.preprocess(self.images), scope=FIRST)
      self.crops = tf.compat.v1.placeholder(tf.float32, [2, CROP_SIZE, CROP_SIZE,
                                                         self.rpn_depth])
      self.box_features = self.extractor.extract_box_classifier_features(self.crops,
                                                                         scope=SECOND)
      self.checkpoint_map = self.extractor.restore_from_classification_checkpoint_fn(
          FIRST, SECOND)


@functools.lru_cache(maxsize=None)
def _model(extractor_type, stride, dynamic_image=False):
  """_Model(...), built once per argument tuple (graph construction dominates)."""
  return _Model(extractor_type, stride, dynamic_image)


def _config_model(config_name):
  """The model of `config_name`'s settings; ResNet-50 at stride 16 is the dynamic-size one."""
  extractor_type, stride = _CONFIGS[config_name]
  return _model(extractor_type, stride, extractor_type == 'faster_rcnn_resnet50' and stride == 16)


def test_every_sample_config_of_these_types_is_checked():
  ours = {name for name in zoo_testlib.sample_config_names('faster_rcnn')
          if any(kind in name for kind in ('resnet50', 'resnet101', 'resnet152', 'inception_v2'))}
  assert ours == set(_CONFIGS)


@pytest.mark.parametrize('config_name', sorted(_CONFIGS))
@pytest.mark.parametrize('prefix', [FIRST + '/', SECOND + '/'])
def test_variables_equal_the_zoo_checkpoint(config_name, prefix):
  model = _config_model(config_name)
  expected = zoo_testlib.reference_variables(config_name, prefix)
  assert expected
  assert zoo_testlib.layout_difference(
      expected, zoo_testlib.graph_variables(prefix, model.graph)) == ''


@pytest.mark.parametrize('config_name', sorted(
    name for name, (kind, stride) in _CONFIGS.items()
    if not (kind == 'faster_rcnn_resnet50' and stride == 16)))
def test_feature_shapes_follow_the_stride(config_name):
  model = _config_model(config_name)
  _, stride = _CONFIGS[config_name]
  cells = IMAGE_SIZE // stride
  assert model.rpn_features.shape.as_list() == [1, cells, cells, model.rpn_depth]
  # Inception's Mixed_5a halves the crop (ceil 7 / 2 = 4); ResNet's block4 keeps it.
  box_side = 4 if 'inception' in config_name else CROP_SIZE
  assert model.box_features.shape.as_list() == [2, box_side, box_side, model.box_depth]


def test_resnet50_forward_pass_is_finite_at_stride_16():
  model = _model('faster_rcnn_resnet50', 16, True)
  rng = np.random.RandomState(0)
  with model.graph.as_default(), tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    rpn, boxes = session.run([model.rpn_features, model.box_features], {
        model.images: rng.uniform(0, 255, [1, IMAGE_SIZE, 80, 3]),
        model.crops: rng.uniform(0, 1, [2, CROP_SIZE, CROP_SIZE, 1024])})
    # 64x80 pixels at stride 16.
    assert rpn.shape == (1, 4, 5, 1024)
    assert boxes.shape == (2, CROP_SIZE, CROP_SIZE, 2048)
    assert np.all(np.isfinite(rpn)) and np.all(np.isfinite(boxes))
    assert np.all(rpn >= 0.0) and rpn.max() > 0.0  # block3 ends in a ReLU
    with pytest.raises(tf.errors.InvalidArgumentError, match='at least 33'):
      session.run(model.rpn_features, {model.images: np.zeros([1, 32, 64, 3])})


def test_resnet_gradients_reach_blocks_1_to_3_and_the_second_stage():
  model = _model('faster_rcnn_resnet50', 16, True)
  with model.graph.as_default():
    loss = tf.reduce_sum(model.rpn_features) + tf.reduce_sum(model.box_features)
    weights = [v for v in tf.compat.v1.trainable_variables() if v.op.name.endswith('weights')]
    gradients = dict(zip(weights, tf.gradients(loss, weights)))
  for variable, gradient in gradients.items():
    # The first stage's block4 exists only for the checkpoint; nothing reads it.
    unread = variable.op.name.startswith(FIRST + '/resnet_v1_50/block4/')
    assert (gradient is None) == unread, variable.op.name


def test_batch_norm_is_frozen_unless_trainable():
  assert not _model('faster_rcnn_resnet50', 16, True).graph.get_collection(
      tf.compat.v1.GraphKeys.UPDATE_OPS)
  for extractor_class, depth in [
      (resnet_extractors.FasterRCNNResnet50FeatureExtractor, 1024),
      (inception_extractor.FasterRCNNInceptionV2FeatureExtractor, 576)]:
    with tf.Graph().as_default() as graph:
      extractor = extractor_class(is_training=True, first_stage_features_stride=16,
                                  batch_norm_trainable=True)
      extractor.extract_box_classifier_features(tf.zeros([1, 7, 7, depth]), scope=SECOND)
      # Two moving averages per batch norm: block4 has 10 convs, Mixed_5a..5c 19.
      expected_updates = 2 * (10 if depth == 1024 else 19)
      assert len(graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)) == expected_updates


def test_resnet_checkpoint_map_names_slim_resnet_v1_50_classification_variables():
  with tf.Graph().as_default():
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
      resnet_v1.resnet_v1_50(tf.zeros([1, 224, 224, 3]), num_classes=1000)
    classification = zoo_testlib.graph_variables('resnet_v1_50/')
  model = _model('faster_rcnn_resnet50', 16, True)
  mapped = {name: variable.shape.as_list() for name, variable in model.checkpoint_map.items()}
  assert zoo_testlib.layout_difference(
      {name: shape for name, shape in classification.items() if '/logits/' not in name},
      mapped) == ''
  # The shared block4 names restore the second stage, the copy that is read.
  for name, variable in model.checkpoint_map.items():
    expected_stage = SECOND if name.startswith('resnet_v1_50/block4/') else FIRST
    assert variable.op.name == expected_stage + '/' + name


def test_inception_checkpoint_map_names_slim_inception_v2_classification_variables():
  with tf.Graph().as_default():
    # slim's released checkpoint also normalizes the separable Conv2d_1a_7x7,
    # which tf_slim's arg_scope leaves out.
    with slim.arg_scope(inception_v2.inception_v2_arg_scope()), slim.arg_scope(
        [slim.separable_conv2d], normalizer_fn=slim.batch_norm):
      inception_v2.inception_v2(tf.zeros([1, 224, 224, 3]), num_classes=1001)
    classification = zoo_testlib.graph_variables('InceptionV2/')
  model = _model('faster_rcnn_inception_v2', 16)
  mapped = {name: variable.shape.as_list() for name, variable in model.checkpoint_map.items()}
  # The classification net's batch norm has no learned scale; the detector's has
  # (a restore reads only what the checkpoint holds).
  assert zoo_testlib.layout_difference(
      {name: shape for name, shape in classification.items() if '/Logits/' not in name},
      {name: shape for name, shape in mapped.items() if not name.endswith('/gamma')}) == ''


@pytest.mark.parametrize('extractor_class', [
    resnet_extractors.FasterRCNNResnet101FeatureExtractor,
    inception_extractor.FasterRCNNInceptionV2FeatureExtractor])
def test_unsupported_stride_is_named(extractor_class):
  with pytest.raises(ValueError, match='first_stage_features_stride'):
    extractor_class(is_training=False, first_stage_features_stride=32)


def test_preprocessing_by_hand():
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    resnet = resnet_extractors.FasterRCNNResnet152FeatureExtractor(False, 16)
    inception = inception_extractor.FasterRCNNInceptionV2FeatureExtractor(False, 16)
    pixels = tf.constant([[[[123.68, 116.779, 103.939], [0.0, 127.5, 255.0]]]])
    centered, scaled = session.run([resnet.preprocess(pixels), inception.preprocess(pixels)])
    np.testing.assert_allclose(centered[0, 0], [[0.0, 0.0, 0.0],
                                                [-123.68, 10.721, 151.061]], atol=1e-4)
    np.testing.assert_allclose(scaled[0, 0, 1], [-1.0, 0.0, 1.0], atol=1e-6)
    gray = tf.zeros([1, 2, 2, 1])
    assert resnet.preprocess(gray) is gray  # no channel means to subtract


def test_inception_depth_multiplier_and_min_depth_scale_the_second_stage():
  with tf.Graph().as_default():
    extractor = inception_extractor.FasterRCNNInceptionV2FeatureExtractor(
        is_training=False, first_stage_features_stride=16, depth_multiplier=0.5, min_depth=80)
    features = extractor.extract_box_classifier_features(tf.zeros([1, 7, 7, 288]), scope=SECOND)
    layout = zoo_testlib.graph_variables(SECOND + '/InceptionV2/')
  # 352 * 0.5 = 176; 128 * 0.5 = 64 is raised to min_depth 80.
  assert layout['SecondStageFeatureExtractor/InceptionV2/Mixed_5c/Branch_0/Conv2d_0a_1x1/'
                'weights'] == [1, 1, 176 + 160 + 112 + 80, 176]
  assert layout['SecondStageFeatureExtractor/InceptionV2/Mixed_5a/Branch_0/Conv2d_0a_1x1/'
                'weights'] == [1, 1, 288, 80]
  assert features.shape.as_list() == [1, 4, 4, 176 + 160 + 112 + 80]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
