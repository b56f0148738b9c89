"""The faster_rcnn_pnas feature extractor: PNASNet-5 large cut in two.

The OD API has no faster_rcnn_pnas sample config, so no zoo variable list
checks this layout; the checks are the OD API's own shape facts (a 112x112
image gives a 7x7x4320 map; a 17x17 crop gives 9x9x4320 features), depths
and names derived by hand from the PNASNet-5 cell, a real forward pass, and
the checkpoint names.
"""

import functools
import sys

import numpy as np
import pytest
import tensorflow as tf

from models import faster_rcnn_pnas_feature_extractor as pnas_extractor
from models import nasnet_cells
from models import pnasnet
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

FIRST = 'FirstStageFeatureExtractor'
SECOND = 'SecondStageFeatureExtractor'


@functools.lru_cache(maxsize=1)
def _first_stage():
  """(graph, extractor, image placeholder, rpn feature map, endpoints), training mode."""
  graph = tf.Graph()
  with graph.as_default():
    extractor = pnas_extractor.FasterRCNNPNASFeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    images = tf.compat.v1.placeholder(tf.float32, [1, 112, 112, 3])
    rpn_features, endpoints = extractor.extract_proposal_features(
        extractor.preprocess(images), scope=FIRST)
  return graph, extractor, images, rpn_features, endpoints


@functools.lru_cache(maxsize=1)
def _second_stage():
  """(graph, box classifier features) on [1, 17, 17, 4320] crops."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.train.get_or_create_global_step()
    extractor = pnas_extractor.FasterRCNNPNASFeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    crops = tf.compat.v1.placeholder(tf.float32, [1, 17, 17, 4320])
    features = extractor.extract_box_classifier_features(crops, scope=SECOND)
  return graph, features


def test_rpn_feature_map_is_cells_6_and_7_at_stride_16():
  _, _, _, rpn_features, endpoints = _first_stage()
  assert rpn_features.shape.as_list() == [1, 7, 7, 4320]
  assert endpoints['Cell_3'].shape.as_list() == [1, 14, 14, 1080]
  assert endpoints['Cell_7'].shape.as_list() == [1, 7, 7, 2160]
  assert sorted(endpoints) == sorted(['Stem'] + ['Cell_%d' % n for n in range(8)])


def test_box_classifier_features_halve_the_crop():
  assert _second_stage()[1].shape.as_list() == [1, 9, 9, 4320]


def test_first_stage_variables_follow_slims_pnasnet_names():
  layout = zoo_testlib.graph_variables(FIRST + '/', _first_stage()[0])
  cells = sorted({name.split('/')[1] for name in layout})
  assert cells == sorted(['conv0', 'conv0_bn', 'cell_stem_0', 'cell_stem_1'] +
                         ['cell_%d' % n for n in range(8)])
  stem = FIRST + '/cell_stem_0/'
  # The stem cell reads conv0's 96 channels directly (no previous layer).
  assert layout[stem + 'comb_iter_0/left/separable_5x5_1/depthwise_weights'] == [5, 5, 96, 1]
  assert layout[stem + 'comb_iter_0/right/1x1/weights'] == [1, 1, 96, 54]
  # The strided 'none' becomes a strided 1x1 convolution.
  assert layout[stem + 'comb_iter_4/right/1x1/weights'] == [1, 1, 54, 54]
  # cell_4 strides and doubles the depth: 216 * 2.
  assert layout[FIRST + '/cell_4/1x1/weights'] == [1, 1, 1080, 432]
  assert layout[FIRST + '/cell_4/prev_1x1/weights'] == [1, 1, 1080, 432]
  # cell_5 reads cell_3 (twice its size): a factorized reduction.
  assert layout[FIRST + '/cell_5/path1_conv/weights'] == [1, 1, 1080, 216]
  assert layout[FIRST + '/cell_stem_0/comb_iter_0/left/global_step'] == []


def test_second_stage_variables_start_at_cell_8():
  layout = zoo_testlib.graph_variables(SECOND + '/', _second_stage()[0])
  assert sorted({name.split('/')[1] for name in layout}) == ['cell_10', 'cell_11',
                                                             'cell_8', 'cell_9']
  assert layout[SECOND + '/cell_8/1x1/weights'] == [1, 1, 2160, 864]
  assert layout[SECOND + '/cell_8/prev_1x1/weights'] == [1, 1, 2160, 864]
  assert layout[SECOND + '/cell_9/path1_conv/weights'] == [1, 1, 2160, 432]
  assert layout[SECOND + '/cell_11/1x1/weights'] == [1, 1, 4320, 864]


def test_first_stage_forward_pass_is_finite():
  graph, _, images, rpn_features, _ = _first_stage()
  with graph.as_default(), tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    image = np.random.RandomState(0).uniform(0, 255, [1, 112, 112, 3])
    values = sess.run(rpn_features, {images: image})
  assert values.shape == (1, 7, 7, 4320)
  assert np.all(np.isfinite(values)) and np.std(values) > 0


def test_classification_checkpoint_names_are_unscoped_moving_averages():
  graph, extractor = _first_stage()[:2]
  with graph.as_default():
    names = extractor.restore_from_classification_checkpoint_fn(FIRST, SECOND)
  assert names['cell_7/1x1/weights/ExponentialMovingAverage'].op.name == (
      FIRST + '/cell_7/1x1/weights')
  assert len(names) == len(zoo_testlib.graph_variables(FIRST + '/', graph))


def test_stride_other_than_16_is_refused_by_name():
  with pytest.raises(ValueError, match='first_stage_features_stride.*faster_rcnn_pnas'):
    pnas_extractor.FasterRCNNPNASFeatureExtractor(is_training=False,
                                                  first_stage_features_stride=8)


def test_drop_path_covers_fourteen_cells():
  cell = pnasnet.make_cell(pnasnet.LARGE, is_training=True)
  assert cell.drop_path_schedule == nasnet_cells.DropPathSchedule(0.6, 14, 250000)
  assert pnasnet.make_cell(pnasnet.LARGE, is_training=False).drop_path_schedule is None


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
