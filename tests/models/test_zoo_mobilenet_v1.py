"""Tests of the SSD MobileNet v1 family: zoo checkpoint layouts, shapes, restore maps.

For each OD API sample config of an SSD MobileNet v1 type, the extractor
built with that config's feature_extractor settings must create exactly the
`FeatureExtractor/` variables the OD API creates (names and shapes), so the
zoo checkpoint restores completely. Forward passes run at small sizes.
"""

import functools
import re

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators
from models import mobilenet_v1
from models import ssd_mobilenet_v1_feature_extractors as extractors
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

_V1 = extractors.SSDMobileNetV1FeatureExtractor
_EMBEDDED = extractors.EmbeddedSSDMobileNetV1FeatureExtractor
_FPN = extractors.SSDMobileNetV1FpnFeatureExtractor
_PPN = extractors.SSDMobileNetV1PpnFeatureExtractor

# Sample configs grouped by the feature_extractor settings that shape the
# variables (override_base_feature_extractor_hyperparams only changes
# initializers and regularizers, so e.g. ssd_mobilenet_v1_coco and
# ssd_mobilenet_v1_300x300_coco14_sync share a layout). Settings left out are
# the proto defaults: depth_multiplier 1.0, min_depth 16, pad_to_multiple 1.
# group: (extractor class, settings, test image size, feature map shapes at
#         that size, sample configs)
_ZOO_GROUPS = {
    'ssd_mobilenet_v1': (
        _V1, {}, 128,
        [[1, 8, 8, 512], [1, 4, 4, 1024], [1, 2, 2, 512], [1, 1, 1, 256], [1, 1, 1, 256],
         [1, 1, 1, 128]],
        ['ssd_mobilenet_v1_coco', 'ssd_mobilenet_v1_pets',
         'ssd_mobilenet_v1_focal_loss_pets', 'ssd_mobilenet_v1_focal_loss_pets_inference',
         'ssd_mobilenet_v1_300x300_coco14_sync',
         'ssd_mobilenet_v1_quantized_300x300_coco14_sync']),
    'ssd_mobilenet_v1_0.75_depth': (
        _V1, {'depth_multiplier': 0.75, 'override_base_feature_extractor_hyperparams': True},
        128,
        [[1, 8, 8, 384], [1, 4, 4, 768], [1, 2, 2, 384], [1, 1, 1, 192], [1, 1, 1, 192],
         [1, 1, 1, 96]],
        ['ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync',
         'ssd_mobilenet_v1_0.75_depth_quantized_300x300_coco14_sync',
         'ssd_mobilenet_v1_0.75_depth_quantized_300x300_pets_sync']),
    'ssdlite_mobilenet_v1': (
        _V1, {'use_depthwise': True}, 128,
        [[1, 8, 8, 512], [1, 4, 4, 1024], [1, 2, 2, 512], [1, 1, 1, 256], [1, 1, 1, 256],
         [1, 1, 1, 128]],
        ['ssdlite_mobilenet_v1_coco']),
    'embedded_ssd_mobilenet_v1': (
        _EMBEDDED, {'depth_multiplier': 0.125}, 256,
        [[1, 16, 16, 64], [1, 8, 8, 128], [1, 4, 4, 64], [1, 2, 2, 32], [1, 1, 1, 32]],
        ['embedded_ssd_mobilenet_v1_coco']),
    'ssd_mobilenet_v1_fpn': (
        _FPN, {'fpn_min_level': 3, 'fpn_max_level': 7,
               'override_base_feature_extractor_hyperparams': True}, 128,
        [[1, 16, 16, 256], [1, 8, 8, 256], [1, 4, 4, 256], [1, 2, 2, 256], [1, 1, 1, 256]],
        ['ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync']),
    'ssd_mobilenet_v1_ppn': (
        _PPN, {'override_base_feature_extractor_hyperparams': True}, 128,
        [[1, 8, 8, 512], [1, 4, 4, 512], [1, 2, 2, 512], [1, 1, 1, 512], [1, 1, 1, 512],
         [1, 1, 1, 512]],
        ['ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync']),
}


def make_extractor(extractor_class, is_training=True, **settings):
  arguments = dict(is_training=is_training, depth_multiplier=1.0, min_depth=16,
                   pad_to_multiple=1,
                   conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(is_training))
  arguments.update(settings)
  return extractor_class(**arguments)


def extract(extractor, images):
  """Feature maps of `images` ([0, 255]) as SSDMetaArch.predict builds them."""
  with tf.compat.v1.variable_scope('FeatureExtractor'):
    return extractor.extract_features(extractor.preprocess(images))


def random_images(size, batch=1, seed=0):
  return np.random.RandomState(seed).uniform(0, 255, [batch, size, size, 3]).astype(
      np.float32)


class Built:
  """What one extractor graph gives: maps of a forward pass, variables, restore map."""

  def __init__(self, extractor, images_np):
    with tf.Graph().as_default():
      feature_maps = extract(extractor, tf.constant(images_np))
      self.variables = zoo_testlib.graph_variables('FeatureExtractor/')
      self.restore_map = {
          name: variable.shape.as_list() for name, variable in
          extractor.restore_from_classification_checkpoint_fn('FeatureExtractor').items()}
      self.batch_norm_updates = [
          op.name for op in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
          if '/BatchNorm/' in op.name]
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        self.feature_maps = sess.run(feature_maps)


@functools.lru_cache(maxsize=1)
def classifier_build():
  """A 0.75-depth `mobilenet_v1` classifier (10 classes) on 2 images.

  Returns:
    (logits shape, softmax probabilities [2, 10], {variable name: shape}).
  """
  with tf.Graph().as_default():
    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(is_training=False)):
      logits, end_points = mobilenet_v1.mobilenet_v1(
          tf.constant(random_images(64, batch=2)), num_classes=10, depth_multiplier=0.75,
          is_training=False)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      probabilities = sess.run(end_points['Predictions'])
    return (logits.shape.as_list(), probabilities,
            zoo_testlib.graph_variables('MobilenetV1/'))


def classifier_variables():
  return classifier_build()[2]


def classification_checkpoint_names(variables):
  """Names a classification checkpoint holds that a detector restores (no Logits)."""
  return {name: shape for name, shape in variables.items()
          if not name.startswith('MobilenetV1/Logits/')}


class ZooExtractorTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(*[(group.replace('.', '_'), group)
                                    for group in sorted(_ZOO_GROUPS)])
  def test_zoo_extractor(self, group):
    extractor_class, settings, size, shapes, config_names = _ZOO_GROUPS[group]
    built = Built(make_extractor(extractor_class, **settings), random_images(size))

    # Exactly the OD API's variables, for every sample config of the group.
    for config_name in config_names:
      expected = zoo_testlib.reference_variables(config_name + '.config',
                                                 'FeatureExtractor/')
      self.assertNotEmpty(expected, config_name)
      self.assertEqual(zoo_testlib.layout_difference(expected, built.variables), '',
                       config_name)

    self.assertEqual([list(m.shape) for m in built.feature_maps], shapes)
    for feature_map in built.feature_maps:
      self.assertTrue(np.all(np.isfinite(feature_map)))
    self.assertNotEmpty(built.batch_norm_updates)   # is_training=True

    # Classification fine-tuning: every variable without 'FeatureExtractor/'
    # (the trainer skips those a checkpoint lacks); the base network's are
    # the classifier checkpoint's names.
    self.assertEqual(sorted(built.restore_map),
                     sorted(name[len('FeatureExtractor/'):] for name in built.variables))
    base = {name: shape for name, shape in built.restore_map.items()
            if not re.search(r'_[12]_Conv2d_|/fpn/', name)}
    self.assertLen(base, 135)
    if settings.get('depth_multiplier') == 0.75:
      self.assertEqual(zoo_testlib.layout_difference(
          classification_checkpoint_names(classifier_variables()), base), '')


class VariantsTest(tf.test.TestCase):
  """Settings no sample config uses: explicit padding, pad_to_multiple, inference."""

  def test_ssdlite_explicit_padding_pad_to_multiple_inference(self):
    built = Built(make_extractor(_V1, is_training=False, depth_multiplier=0.25, min_depth=8,
                                 use_depthwise=True, use_explicit_padding=True,
                                 pad_to_multiple=32, num_layers=4),
                  random_images(100, batch=2))
    # 100 pads to 128.
    self.assertEqual([list(m.shape) for m in built.feature_maps],
                     [[2, 8, 8, 128], [2, 4, 4, 256], [2, 2, 2, 128], [2, 1, 1, 64]])
    self.assertTrue(all(np.all(np.isfinite(m)) for m in built.feature_maps))
    self.assertEqual(built.batch_norm_updates, [])

  def test_fpn_depthwise_explicit_padding_native_resize(self):
    built = Built(make_extractor(_FPN, depth_multiplier=0.25, min_depth=8, fpn_min_level=2,
                                 fpn_max_level=6, use_depthwise=True,
                                 use_explicit_padding=True, use_native_resize_op=True),
                  random_images(96))
    # 96 / 32 = 3: the odd level crops the upsampled coarser one.
    self.assertEqual([list(m.shape) for m in built.feature_maps],
                     [[1, 24, 24, 64], [1, 12, 12, 64], [1, 6, 6, 64], [1, 3, 3, 64],
                      [1, 2, 2, 64]])
    self.assertTrue(all(np.all(np.isfinite(m)) for m in built.feature_maps))
    # With depthwise FPN the last MobileNet blocks are narrower (512, 256).
    self.assertEqual(
        built.variables['FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/weights'],
        [1, 1, 128, 64])
    self.assertIn('FeatureExtractor/MobilenetV1/fpn/bottom_up_Conv2d_14/depthwise_weights',
                  built.variables)


class ClassifierTest(tf.test.TestCase):

  def test_logits_and_predictions(self):
    logits_shape, probabilities, _ = classifier_build()
    self.assertEqual(logits_shape, [2, 10])
    self.assertAllClose(probabilities.sum(axis=1), [1.0, 1.0], atol=1e-5)

  def test_classifier_minus_logits_is_the_zoo_backbone(self):
    classifier = classifier_variables()
    self.assertEqual(classifier['MobilenetV1/Logits/Conv2d_1c_1x1/weights'], [1, 1, 768, 10])
    zoo = zoo_testlib.reference_variables(
        'ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync.config', 'FeatureExtractor/')
    zoo_backbone = {name[len('FeatureExtractor/'):]: shape for name, shape in zoo.items()
                    if not re.search(r'_[12]_Conv2d_', name)}
    self.assertEqual(zoo_testlib.layout_difference(
        zoo_backbone, classification_checkpoint_names(classifier)), '')


class MobilenetV1Test(tf.test.TestCase):

  def test_output_stride_keeps_resolution_with_dilation(self):
    with tf.Graph().as_default():
      net, end_points = mobilenet_v1.mobilenet_v1_base(
          tf.zeros([1, 64, 64, 3]), final_endpoint='Conv2d_7_pointwise',
          depth_multiplier=0.25, output_stride=8)
      self.assertEqual(net.shape.as_list(), [1, 8, 8, 128])
      self.assertEqual(list(end_points)[-1], 'Conv2d_7_pointwise')
      dilated = tf.compat.v1.get_default_graph().get_operations()
      self.assertTrue(any('Conv2d_7_depthwise' in op.name and 'SpaceToBatchND' in op.type
                          for op in dilated))

  def test_explicit_padding_matches_same_padding_sizes(self):
    for size in (63, 65):
      with tf.Graph().as_default():
        images = tf.zeros([1, size, size, 3])
        _, same = mobilenet_v1.mobilenet_v1_base(
            images, final_endpoint='Conv2d_6_pointwise', depth_multiplier=0.25)
        _, explicit = mobilenet_v1.mobilenet_v1_base(
            images, final_endpoint='Conv2d_6_pointwise', depth_multiplier=0.25,
            use_explicit_padding=True, scope='Explicit')
        for name in same:
          self.assertEqual(same[name].shape.as_list(), explicit[name].shape.as_list(), name)

  def test_bad_arguments(self):
    with tf.Graph().as_default():
      images = tf.zeros([1, 64, 64, 3])
      with self.assertRaisesRegex(ValueError, 'final_endpoint'):
        mobilenet_v1.mobilenet_v1_base(images, final_endpoint='Conv2d_14')
      with self.assertRaisesRegex(ValueError, 'output_stride'):
        mobilenet_v1.mobilenet_v1_base(images, output_stride=4)
      with self.assertRaisesRegex(ValueError, 'depth_multiplier'):
        mobilenet_v1.mobilenet_v1_base(images, depth_multiplier=0)


class FeatureMapGeneratorsTest(tf.test.TestCase):

  def test_layout_names_and_pool_residual(self):
    with tf.Graph().as_default():
      features = {'a': tf.zeros([1, 8, 8, 32])}
      maps = feature_map_generators.multi_resolution_feature_maps(
          {'from_layer': ['a', '', ''], 'layer_depth': [-1, 32, 16], 'use_depthwise': True},
          depth_multiplier=1.0, min_depth=8, insert_1x1_conv=True, image_features=features,
          pool_residual=True)
      self.assertEqual(list(maps), ['a', 'a_2_Conv2d_1_3x3_s2_32', 'a_2_Conv2d_2_3x3_s2_16'])
      names = [op.name for op in tf.compat.v1.get_default_graph().get_operations()]
      self.assertTrue(any('a_2_Conv2d_1_3x3_s2_32_pool' in name for name in names))
      self.assertFalse(any('a_2_Conv2d_2_3x3_s2_16_pool' in name for name in names))

  def test_layout_errors_name_the_field(self):
    with tf.Graph().as_default():
      features = {'a': tf.zeros([1, 8, 8, 4])}
      with self.assertRaisesRegex(ValueError, 'layer_depth'):
        feature_map_generators.multi_resolution_feature_maps(
            {'from_layer': ['a', ''], 'layer_depth': [-1]}, 1.0, 8, True, features)
      with self.assertRaisesRegex(KeyError, "'b'"):
        feature_map_generators.multi_resolution_feature_maps(
            {'from_layer': ['b'], 'layer_depth': [-1]}, 1.0, 8, True, features)
      with self.assertRaisesRegex(ValueError, 'exactly one'):
        feature_map_generators.pooling_pyramid_feature_maps(0, 3, {'a': 1, 'b': 2})

  def test_pooling_pyramid_with_convolutions(self):
    with tf.Graph().as_default():
      maps = feature_map_generators.pooling_pyramid_feature_maps(
          16, 3, {'x': tf.zeros([1, 8, 8, 4])}, replace_pool_with_conv=True)
      self.assertEqual(list(maps), ['Base_Conv2d_1x1_16', 'Conv2d_0_3x3_s2_16',
                                    'Conv2d_1_3x3_s2_16'])
      self.assertEqual(maps['Conv2d_1_3x3_s2_16'].shape.as_list(), [1, 2, 2, 16])

  def test_fixed_padding(self):
    with tf.Graph().as_default():
      padded = feature_map_generators.fixed_padding(tf.zeros([1, 5, 5, 1]), 3, rate=2)
      self.assertEqual(padded.shape.as_list(), [1, 9, 9, 1])
      self.assertEqual(
          feature_map_generators.fixed_padding(tf.zeros([1, 5, 5, 1]), 2).shape.as_list(),
          [1, 6, 6, 1])


class ExtractorErrorsTest(tf.test.TestCase):

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, 'pad_to_multiple'):
      make_extractor(_EMBEDDED, pad_to_multiple=32)
    with self.assertRaisesRegex(ValueError, 'num_layers'):
      make_extractor(_V1, num_layers=7)
    with self.assertRaisesRegex(ValueError, 'min_level'):
      make_extractor(_FPN, fpn_min_level=1)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, '256'):
        extract(make_extractor(_EMBEDDED), tf.zeros([1, 128, 128, 3]))
      with self.assertRaisesRegex(ValueError, '33'):
        extract(make_extractor(_V1), tf.zeros([1, 32, 32, 3]))


if __name__ == '__main__':
  tf.test.main()
