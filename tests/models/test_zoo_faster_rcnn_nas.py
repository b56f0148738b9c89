"""The faster_rcnn_nas feature extractor creates the zoo checkpoint's variables.

The `FirstStageFeatureExtractor/` and `SecondStageFeatureExtractor/`
variables (names and shapes) must equal what the OD API builds for
faster_rcnn_nas_coco.config (tests/models/zoo_testlib.py), so that the zoo
checkpoint restores completely. Also checked: stride and depth of the RPN
feature map, the second stage's output and inputs, a real forward pass, the
names of the classification checkpoint, and the cell machinery on tiny inputs.

NASNet-A large is heavy to build, so each stage is built once, in a graph of
its own, and shared by the tests.
"""

import functools
import sys

import numpy as np
import pytest
import tensorflow as tf

from models import faster_rcnn_nas_feature_extractor as nas_extractor
from models import nasnet
from models import nasnet_cells
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

# Whole backbones' graphs or real processes: tens of seconds.
pytestmark = pytest.mark.slow

CONFIG = 'faster_rcnn_nas_coco.config'
FIRST = 'FirstStageFeatureExtractor'
SECOND = 'SecondStageFeatureExtractor'
IMAGE_SIZE = 64
CROP_SIZE = 17  # the sample config's initial_crop_size (maxpool stride 1)


@functools.lru_cache(maxsize=1)
def _first_stage():
  """(graph, extractor, image placeholder, rpn feature map, endpoints), training mode.

  No global step exists beforehand, as when the OD API's variable list was made.
  """
  graph = tf.Graph()
  with graph.as_default():
    extractor = nas_extractor.FasterRCNNNASFeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    images = tf.compat.v1.placeholder(tf.float32, [1, IMAGE_SIZE, IMAGE_SIZE, 3])
    rpn_features, endpoints = extractor.extract_proposal_features(
        extractor.preprocess(images), scope=FIRST)
  return graph, extractor, images, rpn_features, endpoints


@functools.lru_cache(maxsize=1)
def _second_stage():
  """(graph, extractor, box classifier features) on [1, 17, 17, 4032] crops."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.train.get_or_create_global_step()
    extractor = nas_extractor.FasterRCNNNASFeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    crops = tf.compat.v1.placeholder(tf.float32, [1, CROP_SIZE, CROP_SIZE, 4032])
    features = extractor.extract_box_classifier_features(crops, scope=SECOND)
  return graph, extractor, features


def test_first_stage_variables_equal_the_zoo_checkpoints():
  graph = _first_stage()[0]
  expected = zoo_testlib.reference_variables(CONFIG, FIRST + '/')
  assert len(expected) == 1054
  actual = zoo_testlib.graph_variables(FIRST + '/', graph)
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_second_stage_variables_equal_the_zoo_checkpoints():
  graph = _second_stage()[0]
  expected = zoo_testlib.reference_variables(CONFIG, SECOND + '/')
  assert len(expected) == 491
  actual = zoo_testlib.graph_variables(SECOND + '/', graph)
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_both_stages_and_the_predictors_make_the_whole_zoo_layout():
  predictors = {name for name in zoo_testlib.reference_variables(CONFIG)
                if not name.startswith((FIRST + '/', SECOND + '/'))}
  ours = (set(zoo_testlib.graph_variables(FIRST + '/', _first_stage()[0]))
          | set(zoo_testlib.graph_variables(SECOND + '/', _second_stage()[0])))
  assert len(ours) + len(predictors) == len(zoo_testlib.reference_variables(CONFIG)) == 1555


def test_rpn_feature_map_is_cells_10_and_11_at_stride_16():
  _, _, _, rpn_features, endpoints = _first_stage()
  size = IMAGE_SIZE // 16
  assert rpn_features.shape.as_list() == [1, size, size, 4032]
  assert endpoints['Cell_10'].shape.as_list() == [1, size, size, 2016]
  assert endpoints['Cell_11'].shape.as_list() == [1, size, size, 2016]
  assert endpoints['Cell_5'].shape.as_list() == [1, 2 * size, 2 * size, 1008]
  assert endpoints['Stem'].shape.as_list() == [1, 2 * size, 2 * size, 336]
  assert sorted(endpoints) == sorted(['Stem', 'Reduction_Cell_0'] +
                                     ['Cell_%d' % n for n in range(12)])


def test_box_classifier_features_halve_the_crop():
  features = _second_stage()[2]
  assert features.shape.as_list() == [1, 9, 9, 4032]


def test_second_stage_reads_cell_11_as_input_and_cell_10_as_previous():
  graph = _second_stage()[0]

  def source_of(op_name):
    # Walk back through the relu in front of the 1x1 convolution.
    op = graph.get_operation_by_name(op_name).inputs[0].op
    return op.inputs[0] if op.type == 'Relu' else op.outputs[0]

  current = source_of(SECOND + '/reduction_cell_1/1x1/Conv2D')
  previous = source_of(SECOND + '/reduction_cell_1/prev_1x1/Conv2D')
  assert current.op.type == previous.op.type == 'Split'
  assert (previous.value_index, current.value_index) == (0, 1)


def test_first_stage_forward_pass_is_finite():
  graph, _, images, rpn_features, _ = _first_stage()
  with graph.as_default(), tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    image = np.random.RandomState(0).uniform(0, 255, [1, IMAGE_SIZE, IMAGE_SIZE, 3])
    values = sess.run(rpn_features, {images: image})
  assert values.shape == (1, 4, 4, 4032)
  assert np.all(np.isfinite(values)) and np.std(values) > 0


def test_drop_path_creates_the_global_step_in_the_first_cell_as_the_od_api():
  graph = _first_stage()[0]
  with graph.as_default():
    step = tf.compat.v1.train.get_global_step()
  assert step.op.name == FIRST + '/cell_stem_0/comb_iter_0/left/global_step'


def _batch_norm_modes(graph):
  return {op.get_attr('is_training') for op in graph.get_operations()
          if op.type == 'FusedBatchNormV3'}


def test_batch_norm_trains_in_the_first_stage_only_as_the_od_api():
  # The OD API's first stage builds through slim's NASNet, whose own
  # is_training overrides the frozen batch norm; its second stage does not.
  assert _batch_norm_modes(_first_stage()[0]) == {True}
  assert _batch_norm_modes(_second_stage()[0]) == {False}


def test_classification_checkpoint_names_are_unscoped_moving_averages():
  graph, extractor = _first_stage()[:2]
  with graph.as_default():
    names = extractor.restore_from_classification_checkpoint_fn(FIRST, SECOND)
  assert len(names) == 1054
  variable = names['cell_0/1x1/weights/ExponentialMovingAverage']
  assert variable.op.name == FIRST + '/cell_0/1x1/weights'
  assert 'conv0_bn/moving_mean/ExponentialMovingAverage' in names
  graph, extractor = _second_stage()[:2]
  with graph.as_default():
    names = extractor.restore_from_classification_checkpoint_fn(FIRST, SECOND)
  assert names['cell_17/prev_1x1/weights/ExponentialMovingAverage'].op.name == (
      SECOND + '/cell_17/prev_1x1/weights')


def test_stride_other_than_16_is_refused_by_name():
  with pytest.raises(ValueError, match='first_stage_features_stride'):
    nas_extractor.FasterRCNNNASFeatureExtractor(is_training=False,
                                                first_stage_features_stride=8)


def test_dynamic_image_size_is_refused_by_name():
  with tf.Graph().as_default():
    extractor = nas_extractor.FasterRCNNNASFeatureExtractor(False, 16)
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    with pytest.raises(ValueError, match='preprocessed_inputs'):
      extractor.extract_proposal_features(images, scope=FIRST)


def test_preprocess_maps_pixels_to_minus_one_one():
  with tf.Graph().as_default():
    extractor = nas_extractor.FasterRCNNNASFeatureExtractor(False, 16)
    out = extractor.preprocess(tf.constant([[[[0.0, 127.5, 255.0]]]]))
    with tf.compat.v1.Session() as sess:
      np.testing.assert_allclose(sess.run(out), [[[[-1.0, 0.0, 1.0]]]], atol=1e-6)


def test_reduction_cells_sit_before_cells_6_and_12():
  assert nasnet_cells.reduction_cell_indices(18, 2) == [6, 12]
  assert nasnet_cells.reduction_cell_indices(12, 2) == [4, 8]


def test_factorized_reduction_halves_size_and_splits_odd_depth():
  with tf.Graph().as_default():
    net = tf.ones([1, 5, 5, 4])
    out = nasnet_cells.factorized_reduction(net, 7, stride=2)
    assert out.shape.as_list() == [1, 3, 3, 7]
    layout = zoo_testlib.graph_variables()
  assert layout['path1_conv/weights'] == [1, 1, 4, 3]
  assert layout['path2_conv/weights'] == [1, 1, 4, 4]


def test_drop_path_keeps_whole_examples_scaled_or_zeroes_them():
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(1)
    net = tf.ones([64, 2, 2, 3])
    out = nasnet_cells.drop_path(net, 0.5)
    with tf.compat.v1.Session() as sess:
      values = sess.run(out)
  per_example = values.reshape(64, -1)
  assert set(np.unique(per_example)) <= {0.0, 2.0}
  assert np.all(per_example.min(axis=1) == per_example.max(axis=1))
  assert 0 < np.sum(per_example[:, 0] == 0) < 64


def test_drop_path_schedule_by_hand():
  schedule = nasnet_cells.DropPathSchedule(keep_prob=0.7, total_num_cells=22,
                                           total_training_steps=250000)
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    last_cell = nasnet_cells.scheduled_keep_prob(schedule, cell_index=21)
    first_cell = nasnet_cells.scheduled_keep_prob(schedule, cell_index=10)
    with tf.compat.v1.Session() as sess:
      sess.run(step.assign(125000))
      values = sess.run([last_cell, first_cell])
  # Half-way: the last cell is half-way to 0.7; cell 10 (half as deep) to 0.85.
  np.testing.assert_allclose(values, [0.85, 0.925], rtol=1e-6)


def test_evaluation_cells_have_no_drop_path_and_no_global_step():
  normal, _ = nasnet.make_cells(nasnet.LARGE, is_training=False)
  with tf.Graph().as_default():
    net = tf.ones([1, 6, 6, 16])
    # 168 * filter_scaling = 8 filters per state; six unused states.
    out = normal(net, scope='cell_0', filter_scaling=8 / 168.0, prev_layer=net,
                 cell_index=2)
    assert out.shape.as_list() == [1, 6, 6, 48]
    assert tf.compat.v1.train.get_global_step() is None
    ops = tf.compat.v1.get_default_graph().get_operations()
    # Random numbers only initialize variables; none masks examples.
    assert not [op.name for op in ops
                if op.type == 'RandomUniform' and '/Initializer/' not in op.name]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
