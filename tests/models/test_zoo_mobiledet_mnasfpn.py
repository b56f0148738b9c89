"""Zoo layouts of the MobileDet and MnasFPN SSD feature extractors.

Each extractor, built in training mode as its OD API sample config asks,
must create exactly the `FeatureExtractor/` variables the OD API creates
for that config (so the zoo checkpoints restore). Forward passes at a small
size and at the configs' 320x320 check the feature-map shapes and values;
the classification restore maps are checked too.
"""

import functools

import numpy as np
import tensorflow as tf

from builders import feature_extractor_registry
from models import ssd_mnasfpn_feature_extractor as mnasfpn
from models import ssd_mobiledet_feature_extractors as mobiledet
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

SCOPE = 'FeatureExtractor'

# Sample config -> extractor class (_mobiledet has the configs' shared kwargs).
MOBILEDET_CONFIGS = {
    'ssdlite_mobiledet_cpu_320x320_coco_sync_4x4.config':
        mobiledet.SSDMobileDetCPUFeatureExtractor,
    'ssdlite_mobiledet_dsp_320x320_coco_sync_4x4.config':
        mobiledet.SSDMobileDetDSPFeatureExtractor,
    'ssdlite_mobiledet_edgetpu_320x320_coco_sync_4x4.config':
        mobiledet.SSDMobileDetEdgeTPUFeatureExtractor,
}
MNASFPN_CONFIG = 'ssd_mobilenet_v2_mnasfpn_shared_box_predictor_320x320_coco_sync.config'

# Depths of C4 and C5 of each MobileDet variant.
MOBILEDET_BACKBONE_DEPTHS = {
    mobiledet.SSDMobileDetCPUFeatureExtractor: (72, 144),
    mobiledet.SSDMobileDetDSPFeatureExtractor: (144, 240),
    mobiledet.SSDMobileDetEdgeTPUFeatureExtractor: (96, 384),
}


def _mobiledet(extractor_class, is_training=True, **kwargs):
  # ssdlite_mobiledet_*: min_depth 16, multiplier 1, depthwise new layers.
  return extractor_class(is_training=is_training, depth_multiplier=1.0, min_depth=16,
                         pad_to_multiple=1,
                         conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(
                             is_training, batch_norm_decay=0.97),
                         use_depthwise=True, **kwargs)


def _mnasfpn(is_training=True, **kwargs):
  # fpn {min_level 3 max_level 6 additional_layer_depth 48}, min_depth 16.
  return mnasfpn.SSDMobileNetV2MnasFPNFeatureExtractor(
      is_training=is_training, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
      conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(
          is_training, batch_norm_decay=0.97),
      fpn_min_level=3, fpn_max_level=6, additional_layer_depth=48,
      override_base_feature_extractor_hyperparams=True, **kwargs)


class _Built:
  """One extractor built once, in training mode, on images of any height and width.

  Graph construction dominates this file's run time, so every test of an
  architecture shares one graph. The variables do not depend on the image
  size, so this graph's layout is comparable with the OD API's 320x320 one.
  """

  def __init__(self, make_extractor):
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.extractor = make_extractor()
      self.images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
      with tf.compat.v1.variable_scope(SCOPE):
        self.feature_maps = self.extractor.extract_features(
            self.extractor.preprocess(self.images))

  def run(self, sizes):
    """[feature-map values for a random size x size image for size in sizes]."""
    with self.graph.as_default(), tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      random = np.random.RandomState(0)
      return [sess.run(self.feature_maps,
                       {self.images: random.uniform(0, 255, [1, size, size, 3])})
              for size in sizes]

  def variables(self, prefix):
    return zoo_testlib.graph_variables(prefix, graph=self.graph)


@functools.lru_cache(maxsize=None)
def _built(config_name):
  if config_name == MNASFPN_CONFIG:
    return _Built(_mnasfpn)
  return _Built(lambda: _mobiledet(MOBILEDET_CONFIGS[config_name]))


class ZooLayoutTest(tf.test.TestCase):

  def _assert_zoo_layout(self, config_name):
    expected = zoo_testlib.reference_variables(config_name, prefix=SCOPE + '/')
    self.assertNotEmpty(expected)
    self.assertEqual(zoo_testlib.layout_difference(
        expected, _built(config_name).variables(SCOPE + '/')), '')

  def test_mobiledet_variables_equal_the_od_api(self):
    for config_name in MOBILEDET_CONFIGS:
      with self.subTest(config=config_name):
        self._assert_zoo_layout(config_name)

  def test_mnasfpn_variables_equal_the_od_api(self):
    self._assert_zoo_layout(MNASFPN_CONFIG)


class ForwardTest(tf.test.TestCase):

  def _assert_finite(self, values):
    for value in values:
      self.assertTrue(np.all(np.isfinite(value)))

  def test_mobiledet_maps_have_ssd_shapes_and_finite_values(self):
    for config_name, extractor_class in MOBILEDET_CONFIGS.items():
      c4_depth, c5_depth = MOBILEDET_BACKBONE_DEPTHS[extractor_class]
      with self.subTest(config=config_name):
        small, zoo_size = _built(config_name).run([64, 320])
        self.assertEqual([v.shape for v in small],
                         [(1, 4, 4, c4_depth), (1, 2, 2, c5_depth), (1, 1, 1, 512),
                          (1, 1, 1, 256), (1, 1, 1, 256), (1, 1, 1, 128)])
        self.assertEqual([v.shape[1] for v in zoo_size], [20, 10, 5, 3, 2, 1])
        self._assert_finite(small + zoo_size)

  def test_mnasfpn_maps_are_levels_3_to_6_of_48_channels(self):
    small, zoo_size = _built(MNASFPN_CONFIG).run([128, 320])
    self.assertEqual([v.shape for v in small],
                     [(1, 16, 16, 48), (1, 8, 8, 48), (1, 4, 4, 48), (1, 2, 2, 48)])
    self.assertEqual([v.shape for v in zoo_size],
                     [(1, 40, 40, 48), (1, 20, 20, 48), (1, 10, 10, 48), (1, 5, 5, 48)])
    self._assert_finite(small + zoo_size)


class RestoreMapTest(tf.test.TestCase):

  def test_mobiledet_maps_its_scope_without_the_feature_extractor_prefix(self):
    config_name = 'ssdlite_mobiledet_dsp_320x320_coco_sync_4x4.config'
    built = _built(config_name)
    with built.graph.as_default():
      restore = built.extractor.restore_from_classification_checkpoint_fn(SCOPE)
    # As in the OD API: everything under the MobileDet scope, new layers too.
    expected = {name[len(SCOPE) + 1:] for name in built.variables(SCOPE + '/')}
    self.assertEqual(set(restore), expected)
    self.assertEqual(restore['MobileDetDSP/Conv/weights'].op.name,
                     SCOPE + '/MobileDetDSP/Conv/weights')

  def test_mnasfpn_maps_only_the_mobilenet_v2_backbone(self):
    built = _built(MNASFPN_CONFIG)
    with built.graph.as_default():
      restore = built.extractor.restore_from_classification_checkpoint_fn(SCOPE)
    backbone = {name[len(SCOPE) + 1:] for name in built.variables(SCOPE + '/MobilenetV2/')}
    self.assertEqual(set(restore), backbone)
    self.assertIn('MobilenetV2/expanded_conv_16/project/weights', restore)
    self.assertNotIn('MobilenetV2/Conv_1/weights', restore)
    self.assertFalse(any(name.startswith('MnasFPN/') for name in restore))


class ArgumentTest(tf.test.TestCase):

  def test_mobiledet_rejects_explicit_padding(self):
    with self.assertRaisesRegex(NotImplementedError, 'use_explicit_padding'):
      _mobiledet(mobiledet.SSDMobileDetCPUFeatureExtractor, use_explicit_padding=True)

  def test_mobiledet_rejects_num_layers_out_of_range(self):
    with self.assertRaisesRegex(ValueError, 'num_layers'):
      _mobiledet(mobiledet.SSDMobileDetCPUFeatureExtractor, num_layers=7)

  def test_mnasfpn_only_spans_levels_3_to_6(self):
    with self.assertRaisesRegex(ValueError, 'fpn_max_level'):
      mnasfpn.SSDMobileNetV2MnasFPNFeatureExtractor(
          is_training=False, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
          conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(False), fpn_max_level=7)

  def test_mnasfpn_rejects_maps_whose_levels_do_not_line_up(self):
    # A 96x96 image: 12 rows at level 3 but C6 has 2 rows, not 96 // 64 = 1.
    with tf.Graph().as_default():
      maps = [tf.zeros([1, rows, rows, 48]) for rows in (12, 6, 3, 2)]
      with self.assertRaisesRegex(ValueError, 'level 6'):
        mnasfpn.check_head_def(mnasfpn.MNASFPN_DEF, maps)

  def test_mnasfpn_rejects_a_block_reading_a_later_node(self):
    cell = list(mnasfpn.MNASFPN_CELL)
    cell[0] = cell[0]._replace(inputs=(1, 5))
    with tf.Graph().as_default():
      maps = [tf.zeros([1, rows, rows, 48]) for rows in (16, 8, 4, 2)]
      with self.assertRaisesRegex(ValueError, 'block 0 reads node 5'):
        mnasfpn.check_head_def({'feature_levels': [3, 4, 5, 6], 'spec': [cell]}, maps)

  def test_extractor_tables_name_the_od_api_types(self):
    served = {extractor_type: feature_extractor_registry.lookup(extractor_type)
              for extractor_type in feature_extractor_registry.types()}
    self.assertEqual(
        sorted(t for t, cls in served.items() if cls.__module__ == mobiledet.__name__),
        ['ssd_mobiledet_cpu', 'ssd_mobiledet_dsp', 'ssd_mobiledet_edgetpu'])
    self.assertEqual([t for t, cls in served.items() if cls.__module__ == mnasfpn.__name__],
                     ['ssd_mobilenet_v2_mnasfpn'])


if __name__ == '__main__':
  tf.test.main()
