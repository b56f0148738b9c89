"""The Inception and ResNet-FPN SSD extractors create the zoo checkpoints' variables.

For four OD API sample configs the `FeatureExtractor/` variables (names and
shapes) must equal what the OD API builds (tests/models/zoo_testlib.py), so
the zoo checkpoints restore completely. Also checked: feature map shapes, a
real forward pass, and the names a classification checkpoint is read with.
"""

import functools
import sys

import numpy as np
import pytest
import tensorflow as tf

from models import ssd_inception_feature_extractors as inception_extractors
from models import ssd_resnet_fpn_feature_extractors as resnet_extractors
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

PREFIX = 'FeatureExtractor/'


# One model per sample config, built once and shared by the tests (graph
# construction dominates the run time): (extractor class, image size, kwargs).
_MODELS = {
    'ssd_inception_v2_coco.config':
        (inception_extractors.SSDInceptionV2FeatureExtractor, 128, {}),
    'ssd_inception_v3_pets.config':
        (inception_extractors.SSDInceptionV3FeatureExtractor, 160, {}),
    'ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco14_sync.config':
        (resnet_extractors.SSDResnet50V1FpnFeatureExtractor, 160,
         dict(fpn_min_level=3, fpn_max_level=7)),
    'ssd_resnet101_v1_fpn_shared_box_predictor_oid_512x512_sync.config':
        (resnet_extractors.SSDResnet101V1FpnFeatureExtractor, 160,
         dict(fpn_min_level=2, fpn_max_level=7)),
}
INCEPTION_V2, INCEPTION_V3, RESNET50_FPN, RESNET101_FPN = _MODELS


def _build(extractor_class, image_size, **kwargs):
  """Builds the extractor on a [1, size, size, 3] batch in a new default graph.

  The settings are those of the zoo configs (training mode, depth multiplier
  1, min_depth 16, conv hyperparams overriding the backbone's).

  Returns:
    (graph, extractor, list of feature maps, the [0, 255] image tensor).
  """
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(0)
    settings = dict(is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
                    conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(True),
                    override_base_feature_extractor_hyperparams=True)
    settings.update(kwargs)
    extractor = extractor_class(**settings)
    images = tf.random.uniform([1, image_size, image_size, 3], 0.0, 255.0, seed=1)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(extractor.preprocess(images))
  return graph, extractor, feature_maps, images


@functools.lru_cache(maxsize=None)
def _zoo_model(config_name):
  """_build's result for the settings of sample config `config_name` (cached)."""
  extractor_class, image_size, kwargs = _MODELS[config_name]
  return _build(extractor_class, image_size, **kwargs)


def _shapes(feature_maps):
  return [tensor.shape.as_list() for tensor in feature_maps]


def _run(graph, tensors):
  with graph.as_default(), tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.global_variables_initializer())
    return session.run(tensors)


@pytest.mark.parametrize('config_name', sorted(_MODELS))
def test_variables_equal_the_od_api(config_name):
  graph = _zoo_model(config_name)[0]
  expected = zoo_testlib.reference_variables(config_name, prefix=PREFIX)
  assert expected, config_name
  actual = zoo_testlib.graph_variables(PREFIX, graph=graph)
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_inception_v2_maps_and_forward_pass():
  graph, extractor, feature_maps, _ = _zoo_model(INCEPTION_V2)
  # Strides 16 and 32 from the backbone, then SAME stride-2 layers.
  assert _shapes(feature_maps) == [[1, 8, 8, 576], [1, 4, 4, 1024], [1, 2, 2, 512],
                                   [1, 1, 1, 256], [1, 1, 1, 256], [1, 1, 1, 128]]
  assert extractor.num_layers == 6
  values = _run(graph, feature_maps)
  assert all(np.isfinite(value).all() for value in values)


def test_inception_v3_maps():
  _, extractor, feature_maps, _ = _zoo_model(INCEPTION_V3)
  # Inception v3's stem is VALID-padded: 160 -> 17, 8, 3 cells per side.
  assert _shapes(feature_maps) == [[1, 17, 17, 288], [1, 8, 8, 768], [1, 3, 3, 2048],
                                   [1, 2, 2, 512], [1, 1, 1, 256], [1, 1, 1, 128]]
  assert extractor.num_layers == 6


def test_resnet50_fpn_maps_and_forward_pass():
  graph, extractor, feature_maps, images = _zoo_model(RESNET50_FPN)
  # Levels 3..7 are strides 8..128; every pyramid map is 256 deep.
  assert _shapes(feature_maps) == [[1, 20, 20, 256], [1, 10, 10, 256], [1, 5, 5, 256],
                                   [1, 3, 3, 256], [1, 2, 2, 256]]
  assert extractor.num_layers == 5
  with graph.as_default():
    preprocessed = extractor.preprocess(images)
  values = _run(graph, feature_maps + [images, preprocessed])
  assert all(np.isfinite(value).all() for value in values[:-2])
  raw, centred = values[-2:]
  np.testing.assert_allclose(raw - centred, np.broadcast_to([123.68, 116.779, 103.939],
                                                            raw.shape), rtol=1e-5)


def test_resnet101_fpn_from_level_2_makes_six_maps():
  _, extractor, feature_maps, _ = _zoo_model(RESNET101_FPN)
  assert extractor.num_layers == 6
  assert _shapes(feature_maps) == [[1, 40, 40, 256], [1, 20, 20, 256], [1, 10, 10, 256],
                                   [1, 5, 5, 256], [1, 3, 3, 256], [1, 2, 2, 256]]


def test_inception_classification_restore_map_strips_the_extractor_scope():
  graph, extractor, _, _ = _zoo_model(INCEPTION_V2)
  with graph.as_default():
    restore_map = extractor.restore_from_classification_checkpoint_fn('FeatureExtractor')
  expected = zoo_testlib.reference_variables(INCEPTION_V2, prefix=PREFIX)
  # As in the OD API: every extractor variable, the SSD layers included
  # (they live in the InceptionV2 scope; the checkpoint filter drops them).
  assert sorted(restore_map) == sorted(name[len(PREFIX):] for name in expected)
  assert 'InceptionV2/Mixed_4c/Branch_0/Conv2d_0a_1x1/weights' in restore_map
  assert restore_map['InceptionV2/Conv2d_2c_3x3/weights'].op.name == (
      'FeatureExtractor/InceptionV2/Conv2d_2c_3x3/weights')


@pytest.mark.parametrize('config_name, backbone', [(RESNET50_FPN, 'resnet_v1_50'),
                                                   (RESNET101_FPN, 'resnet_v1_101')])
def test_resnet_fpn_classification_restore_map_holds_only_the_resnet(config_name, backbone):
  graph, extractor, _, _ = _zoo_model(config_name)
  with graph.as_default():
    restore_map = extractor.restore_from_classification_checkpoint_fn('FeatureExtractor')
  expected = zoo_testlib.reference_variables(config_name, prefix=PREFIX)
  resnet_names = sorted(name[len(PREFIX):] for name in expected
                        if not name.startswith('%s%s/fpn/' % (PREFIX, backbone)))
  assert sorted(restore_map) == resnet_names
  assert '%s/block4/unit_3/bottleneck_v1/conv3/weights' % backbone in restore_map
  assert not any('/fpn/' in name for name in restore_map)


def test_inception_needs_override_of_base_hyperparams():
  with pytest.raises(ValueError, match='override_base_feature_extractor_hyperparams'):
    inception_extractors.SSDInceptionV2FeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(True))


@pytest.mark.parametrize('levels, field', [((1, 7), 'min_level'), ((6, 7), 'min_level'),
                                           ((4, 3), 'max_level')])
def test_resnet_fpn_rejects_levels_the_backbone_lacks(levels, field):
  with pytest.raises(ValueError, match=field):
    resnet_extractors.SSDResnet50V1FpnFeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(True),
        fpn_min_level=levels[0], fpn_max_level=levels[1])


def test_small_images_are_refused():
  with pytest.raises(ValueError, match='129'):
    _build(resnet_extractors.SSDResnet50V1FpnFeatureExtractor, 128)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
