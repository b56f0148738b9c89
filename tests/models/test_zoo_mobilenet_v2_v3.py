"""The MobileNet v2 / v3 / EdgeTPU SSD extractors create the detection zoo's variables.

For each OD API sample config below, an extractor built with that config's
feature_extractor settings must create exactly the `FeatureExtractor/`
variables (names and shapes) the OD API creates, so the zoo checkpoint
restores; its feature maps must have the expected depths and strides; and
its classification restore map must name the backbone as its ImageNet
classifier (models/mobilenet_v2_v3.py) does.
"""

import collections
import functools
import sys

import numpy as np
import pytest
import tensorflow as tf

from builders import feature_extractor_registry
from models import mobilenet_v2_v3
from models import ssd_mobilenet_v2_v3_feature_extractors as extractors
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

ZooCase = collections.namedtuple('ZooCase', ['type', 'kwargs', 'image_size', 'map_shapes'])

# [height, width, depth] of every feature map at `image_size` (strides 16, 32, then
# stride-2 layers; FPN levels 3..7 are strides 8..128).
_SSD_64 = [[4, 4], [2, 2], [1, 1], [1, 1], [1, 1], [1, 1]]
_EXTRA_DEPTHS = [512, 256, 256, 128]


def _ssd_shapes(stride16_depth, stride32_depth):
  depths = [stride16_depth, stride32_depth] + _EXTRA_DEPTHS
  return [size + [depth] for size, depth in zip(_SSD_64, depths)]


# The feature_extractor block of each sample config, in constructor arguments.
ZOO_CASES = {
    'ssd_mobilenet_v2_coco': ZooCase(
        'ssd_mobilenet_v2', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1),
        64, _ssd_shapes(576, 1280)),
    'ssdlite_mobilenet_v2_coco': ZooCase(
        'ssd_mobilenet_v2', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                                 use_depthwise=True),
        64, _ssd_shapes(576, 1280)),
    'ssd_mobilenet_v2_fullyconv_coco': ZooCase(
        'ssd_mobilenet_v2', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                                 use_explicit_padding=True),
        64, _ssd_shapes(576, 1280)),
    # 48x48 is padded to 64x64 (pad_to_multiple 32), so the maps are 64x64's.
    'facessd_mobilenet_v2_quantized_320x320_open_image_v4': ZooCase(
        'ssd_mobilenet_v2', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=32,
                                 use_explicit_padding=True),
        48, _ssd_shapes(576, 1280)),
    'ssd_mobilenet_v2_fpnlite_quantized_shared_box_predictor_256x256_depthmultiplier_75_'
    'coco14_sync': ZooCase(
        'ssd_mobilenet_v2_fpn', dict(depth_multiplier=0.75, min_depth=16, pad_to_multiple=1,
                                     use_depthwise=True, fpn_min_level=3, fpn_max_level=7,
                                     additional_layer_depth=128,
                                     override_base_feature_extractor_hyperparams=True),
        64, [[8, 8, 96], [4, 4, 96], [2, 2, 96], [1, 1, 96], [1, 1, 96]]),
    'ssdlite_mobilenet_v3_large_320x320_coco': ZooCase(
        'ssd_mobilenet_v3_large', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                                       use_depthwise=True,
                                       override_base_feature_extractor_hyperparams=True),
        64, _ssd_shapes(672, 480)),
    'ssdlite_mobilenet_v3_small_320x320_coco': ZooCase(
        'ssd_mobilenet_v3_small', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                                       use_depthwise=True,
                                       override_base_feature_extractor_hyperparams=True),
        64, _ssd_shapes(288, 288)),
    'ssdlite_mobilenet_edgetpu_320x320_coco': ZooCase(
        'ssd_mobilenet_edgetpu', dict(depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                                      use_depthwise=True,
                                      override_base_feature_extractor_hyperparams=True),
        64, _ssd_shapes(384, 192)),
}

Built = collections.namedtuple('Built', ['graph', 'extractor', 'images', 'feature_maps'])


@functools.lru_cache(maxsize=None)
def _build(config_name):
  """Builds the config's extractor in training mode (as the reference was) in a new graph."""
  case = ZOO_CASES[config_name]
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(0)
    extractor = feature_extractor_registry.lookup(case.type)(
        is_training=True, conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(True),
        **case.kwargs)
    images = tf.compat.v1.placeholder(tf.float32, [2, case.image_size, case.image_size, 3])
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(extractor.preprocess(images))
  return Built(graph, extractor, images, feature_maps)


@pytest.mark.parametrize('config_name', sorted(ZOO_CASES))
def test_variables_equal_the_od_api_zoo_layout(config_name):
  built = _build(config_name)
  expected = zoo_testlib.reference_variables(config_name + '.config', 'FeatureExtractor/')
  actual = zoo_testlib.graph_variables('FeatureExtractor/', graph=built.graph)
  assert zoo_testlib.layout_difference(expected, actual) == ''


@pytest.mark.parametrize('config_name', sorted(ZOO_CASES))
def test_feature_map_shapes(config_name):
  built = _build(config_name)
  assert [f.shape.as_list() for f in built.feature_maps] == [
      [2] + shape for shape in ZOO_CASES[config_name].map_shapes]
  assert built.extractor.num_layers == len(built.feature_maps)


def test_forward_pass_gives_finite_feature_maps():
  built = _build('ssdlite_mobilenet_v3_small_320x320_coco')
  with built.graph.as_default(), tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    pixels = np.random.RandomState(0).uniform(0, 255, size=(2, 64, 64, 3))
    values = session.run(built.feature_maps, {built.images: pixels})
  for value, shape in zip(values, ZOO_CASES['ssdlite_mobilenet_v3_small_320x320_coco']
                          .map_shapes):
    assert list(value.shape) == [2] + shape
    assert np.all(np.isfinite(value))


def test_restore_map_names_the_mobilenet_v2_classification_checkpoint():
  built = _build('ssd_mobilenet_v2_coco')
  with built.graph.as_default():
    restore_map = built.extractor.restore_from_classification_checkpoint_fn('FeatureExtractor')
  # As in the OD API, every FeatureExtractor/ variable is offered; the SSD's extra
  # layers (layer_19_*) are simply absent from a classification checkpoint.
  assert sorted(restore_map) == sorted(
      name[len('FeatureExtractor/'):]
      for name in zoo_testlib.graph_variables('FeatureExtractor/', graph=built.graph))
  backbone = {name: variable.shape.as_list() for name, variable in restore_map.items()
              if not name.startswith('MobilenetV2/layer_19_')}

  with tf.Graph().as_default():
    mobilenet_v2_v3.mobilenet_v2(tf.zeros([1, 64, 64, 3]), num_classes=1001)
    classifier = zoo_testlib.graph_variables('MobilenetV2/')
  assert classifier.pop('MobilenetV2/Logits/Conv2d_1c_1x1/weights') == [1, 1, 1280, 1001]
  assert classifier.pop('MobilenetV2/Logits/Conv2d_1c_1x1/biases') == [1001]
  assert zoo_testlib.layout_difference(classifier, backbone) == ''


def test_v3_small_classifier_predicts_a_distribution():
  with tf.Graph().as_default():
    images = tf.random.uniform([2, 64, 64, 3], -1.0, 1.0, seed=1)
    logits, end_points = mobilenet_v2_v3.mobilenet_v3_small(images, num_classes=10)
    variables = zoo_testlib.graph_variables('MobilenetV3/')
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      logits_value, probabilities = session.run([logits, end_points['Predictions']])
  assert variables['MobilenetV3/Conv_1/weights'] == [1, 1, 96, 576]
  assert variables['MobilenetV3/Conv_2/biases'] == [1024]
  assert variables['MobilenetV3/Logits/Conv2d_1c_1x1/weights'] == [1, 1, 1024, 10]
  assert logits_value.shape == (2, 10) and np.all(np.isfinite(logits_value))
  np.testing.assert_allclose(probabilities.sum(axis=1), [1.0, 1.0], rtol=1e-5)


def test_rejects_images_smaller_than_33_pixels():
  extractor = extractors.SSDMobileNetV2FeatureExtractor(
      is_training=False, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
      conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(False))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='at least 33|>= 33'):
      extractor.extract_features(tf.zeros([1, 32, 64, 3]))


@pytest.mark.parametrize('make', [
    lambda: extractors.SSDMobileNetV2FeatureExtractor(
        False, 1.0, 16, 1, zoo_testlib.zoo_conv_hyperparams_fn(False), num_layers=7),
    lambda: extractors.SSDMobileNetV3SmallFeatureExtractor(
        False, 1.0, 16, 1, zoo_testlib.zoo_conv_hyperparams_fn(False), num_layers=0),
    lambda: extractors.SSDMobileNetV2FpnFeatureExtractor(
        False, 1.0, 16, 1, zoo_testlib.zoo_conv_hyperparams_fn(False), fpn_min_level=1),
    lambda: extractors.SSDMobileNetV2FpnFeatureExtractor(
        False, 1.0, 16, 1, zoo_testlib.zoo_conv_hyperparams_fn(False), num_layers=6),
], ids=['v2_num_layers_7', 'v3_num_layers_0', 'fpn_min_level_1', 'fpn_num_layers_mismatch'])
def test_rejects_impossible_layouts(make):
  with pytest.raises(ValueError, match='num_layers|fpn_min_level'):
    make()


def test_base_end_points_and_unknown_final_endpoint():
  with tf.Graph().as_default():
    images = tf.zeros([1, 64, 64, 3])
    net, end_points = mobilenet_v2_v3.mobilenet_edgetpu_base(images, final_endpoint='layer_10')
    assert net is end_points['layer_10']
    assert end_points['layer_3/expansion_output'].shape.as_list() == [1, 16, 16, 128]
    assert 'layer_11' not in end_points
    with pytest.raises(ValueError, match='final_endpoint'):
      mobilenet_v2_v3.mobilenet_v2_base(images, final_endpoint='layer_99')


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
