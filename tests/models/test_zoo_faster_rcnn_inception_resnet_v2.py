"""The Inception-ResNet-v2 Faster R-CNN extractor creates the zoo checkpoints' variables.

For every faster_rcnn_inception_resnet_v2_* / mask_rcnn_inception_resnet_v2_*
sample config, the variables under FirstStageFeatureExtractor/ and
SecondStageFeatureExtractor/ (names and shapes) must equal what the OD API
builds (tests/models/zoo_testlib.py). Also checked: the feature map sizes at
output strides 8 and 16, a real forward pass, batch norm frozen or trained,
and that the classification-checkpoint names exist in slim's layout.
"""

import functools
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from models import faster_rcnn_inception_resnet_v2_feature_extractor as irv2_extractor
from models import inception_resnet_v2
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

FIRST, SECOND = 'FirstStageFeatureExtractor', 'SecondStageFeatureExtractor'
CONFIGS = [name for name in zoo_testlib.sample_config_names()
           if 'inception_resnet_v2' in name and name.startswith(('faster_rcnn', 'mask_rcnn'))]
IMAGE_SIZE = 96
CROP = [1, 17, 17, 1088]


def _build(stride, image_shape, second_stage=True, **kwargs):
  """Both stages (or only the first) of an extractor on placeholders in a new graph.

  Returns:
    (graph, extractor, images placeholder, rpn features, crops placeholder,
     box classifier features); the last two None without the second stage.
  """
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(0)
    extractor = irv2_extractor.FasterRCNNInceptionResnetV2FeatureExtractor(
        is_training=True, first_stage_features_stride=stride, **kwargs)
    images = tf.compat.v1.placeholder(tf.float32, image_shape)
    rpn_features, _ = extractor.extract_proposal_features(extractor.preprocess(images),
                                                          scope=FIRST)
    crops = box_features = None
    if second_stage:
      crops = tf.compat.v1.placeholder(tf.float32, CROP)
      box_features = extractor.extract_box_classifier_features(crops, scope=SECOND)
  return graph, extractor, images, rpn_features, crops, box_features


@functools.lru_cache(maxsize=None)
def _zoo_model():
  """The zoo configs' extractor (atrous, stride 8, frozen batch norm), built once."""
  return _build(8, [1, IMAGE_SIZE, IMAGE_SIZE, 3])


def test_there_are_six_sample_configs():
  assert len(CONFIGS) == 6
  assert 'mask_rcnn_inception_resnet_v2_atrous_coco.config' in CONFIGS


@pytest.mark.parametrize('config_name', CONFIGS)
@pytest.mark.parametrize('stage', [FIRST, SECOND])
def test_variables_equal_the_od_api(config_name, stage):
  graph = _zoo_model()[0]
  expected = zoo_testlib.reference_variables(config_name, prefix=stage + '/')
  assert expected
  actual = zoo_testlib.graph_variables(stage + '/', graph=graph)
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_stride_8_shapes_forward_pass_and_frozen_batch_norm():
  graph, _, images, rpn_features, crops, box_features = _zoo_model()
  assert rpn_features.shape.as_list() == [1, IMAGE_SIZE // 8, IMAGE_SIZE // 8, 1088]
  # Mixed_7a reduces the 17x17 crops with VALID padding: (17 - 3) // 2 + 1 = 8.
  assert box_features.shape.as_list() == [1, 8, 8, 1536]
  with graph.as_default():
    assert not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    rng = np.random.RandomState(0)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      rpn_value, box_value = session.run(
          [rpn_features, box_features],
          {images: rng.uniform(0, 255, images.shape.as_list()),
           crops: rng.normal(size=CROP)})
  assert np.isfinite(rpn_value).all() and np.isfinite(box_value).all()
  assert np.abs(box_value).max() > 0


def test_stride_16_shapes_trainable_batch_norm_decay_and_gradients():
  # 75 is no multiple of 16: with SAME padding every map is ceil(size / stride).
  graph, extractor, images, rpn_features, _, _ = _build(
      16, [1, 75, 75, 3], second_stage=False, batch_norm_trainable=True, weight_decay=1e-4)
  assert rpn_features.shape.as_list() == [1, 5, 5, 1088]
  with graph.as_default():
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    weights_and_biases = [v for v in tf.compat.v1.global_variables()
                          if v.op.name.endswith(('/weights', '/biases'))]
    losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == len(weights_and_biases)
    first_conv = graph.get_tensor_by_name(FIRST + '/InceptionResnetV2/Conv2d_1a_3x3/weights:0')
    gradient, = tf.gradients(tf.reduce_sum(rpn_features), [first_conv])
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      value = session.run(gradient, {images: np.full([1, 75, 75, 3], 100.0)})
  assert np.isfinite(value).all() and np.abs(value).max() > 0
  assert extractor.is_keras_model is False


def test_preprocess_maps_pixels_to_minus_one_one():
  extractor = irv2_extractor.FasterRCNNInceptionResnetV2FeatureExtractor(False, 16)
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    value = session.run(extractor.preprocess(tf.constant([0.0, 127.5, 255.0])))
  np.testing.assert_allclose(value, [-1.0, 0.0, 1.0], atol=1e-6)


def test_bad_arguments_are_named():
  with pytest.raises(ValueError, match='first_stage_features_stride'):
    irv2_extractor.FasterRCNNInceptionResnetV2FeatureExtractor(True, 32)
  with tf.Graph().as_default():
    images = tf.zeros([1, 75, 75, 3])
    with pytest.raises(ValueError, match='final_endpoint'):
      inception_resnet_v2.inception_resnet_v2_base(images, final_endpoint='Logits')
    with pytest.raises(ValueError, match='output_stride'):
      inception_resnet_v2.inception_resnet_v2_base(images, output_stride=32)
    with pytest.raises(ValueError, match='PreAuxLogits'):
      inception_resnet_v2.inception_resnet_v2_base(images, output_stride=8)
    assert not tf.compat.v1.global_variables()


def _classification_backbone():
  """slim's classification trunk, VALID padding, on 299x299 images.

  Returns:
    (graph, {end point: static shape}).
  """
  graph = tf.Graph()
  with graph.as_default():
    with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope()):
      _, end_points = inception_resnet_v2.inception_resnet_v2_base(
          tf.compat.v1.placeholder(tf.float32, [1, 299, 299, 3]), scope='InceptionResnetV2')
  return graph, {name: tensor.shape.as_list()[1:] for name, tensor in end_points.items()}


def test_restore_map_names_are_the_classification_checkpoints():
  graph, extractor = _zoo_model()[:2]
  with graph.as_default():
    restore_map = extractor.restore_from_classification_checkpoint_fn(FIRST, SECOND)
  restored = {name: variable.shape.as_list() for name, variable in restore_map.items()}
  assert len(restored) == len(zoo_testlib.graph_variables(graph=graph))
  # The second stage's block8 run is the third run of the whole net.
  assert restore_map['InceptionResnetV2/Repeat_2/block8_9/Conv2d_1x1/biases'].op.name == (
      SECOND + '/InceptionResnetV2/Repeat/block8_9/Conv2d_1x1/biases')
  backbone, end_point_shapes = _classification_backbone()
  assert zoo_testlib.layout_difference(zoo_testlib.graph_variables(graph=backbone),
                                       restored) == ''
  assert end_point_shapes['MaxPool_5a_3x3'] == [35, 35, 192]
  assert end_point_shapes['PreAuxLogits'] == [17, 17, 1088]
  assert end_point_shapes['Conv2d_7b_1x1'] == [8, 8, 1536]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
