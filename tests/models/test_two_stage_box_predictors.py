"""Tests for the second-stage predictors (Mask R-CNN / Faster R-CNN, R-FCN) and their ops."""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from models import rfcn_box_predictor
from models import two_stage_box_predictors as predictors
from models import two_stage_ops
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

SCOPE = 'SecondStageBoxPredictor'


def fc_hyperparams_fn():
  """The arg_scope dict the zoo's fc_hyperparams build (no batch norm)."""
  with slim.arg_scope(
      [slim.fully_connected], weights_regularizer=slim.l2_regularizer(1e-4),
      weights_initializer=tf.compat.v1.variance_scaling_initializer(
          1.0, mode='fan_avg', distribution='uniform')) as scope:
    return scope


def conv_hyperparams_fn():
  """The arg_scope dict the zoo's second-stage conv_hyperparams build."""
  with slim.arg_scope(
      [slim.conv2d], weights_regularizer=slim.l2_regularizer(1e-4),
      weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.01),
      activation_fn=tf.nn.relu) as scope:
    return scope


def _run(fetches, feed_dict=None):
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(fetches, feed_dict=feed_dict)


# ---------------------------------------------------------------- numpy references


def _np_crop_and_resize(image, box, crop_size, extrapolation_value=0.0):
  """Bilinear crop of one box from image [H, W, C], derived from the definition."""
  height, width, _ = image.shape

  def positions(start, end, count, size):
    if count == 1:
      return [0.5 * (start + end) * (size - 1)]
    return [start * (size - 1) + i * (end - start) * (size - 1) / (count - 1)
            for i in range(count)]

  out = np.full(tuple(crop_size) + image.shape[2:], extrapolation_value, np.float64)
  for i, y in enumerate(positions(box[0], box[2], crop_size[0], height)):
    for j, x in enumerate(positions(box[1], box[3], crop_size[1], width)):
      if not (0 <= y <= height - 1 and 0 <= x <= width - 1):
        continue
      y0, x0 = int(np.floor(y)), int(np.floor(x))
      y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
      dy, dx = y - y0, x - x0
      top = image[y0, x0] * (1 - dx) + image[y0, x1] * dx
      bottom = image[y1, x0] * (1 - dx) + image[y1, x1] * dx
      out[i, j] = top * (1 - dy) + bottom * dy
  return out


def _np_position_sensitive(image, boxes, crop_size, bins, global_pool):
  """Bin (r, c) of each box, cropped from channel group r * bins_x + c."""
  groups = np.split(image, bins[0] * bins[1], axis=2)
  bin_h, bin_w = crop_size[0] // bins[0], crop_size[1] // bins[1]
  results = []
  for ymin, xmin, ymax, xmax in boxes:
    step_y, step_x = (ymax - ymin) / bins[0], (xmax - xmin) / bins[1]
    tiles = np.zeros((crop_size[0], crop_size[1], groups[0].shape[2]))
    for r in range(bins[0]):
      for c in range(bins[1]):
        bin_box = [ymin + r * step_y, xmin + c * step_x,
                   ymin + (r + 1) * step_y, xmin + (c + 1) * step_x]
        tiles[r * bin_h:(r + 1) * bin_h, c * bin_w:(c + 1) * bin_w] = _np_crop_and_resize(
            groups[r * bins[1] + c], bin_box, [bin_h, bin_w])
    results.append(tiles.mean(axis=(0, 1), keepdims=True) if global_pool else tiles)
  return np.stack(results)


# ---------------------------------------------------------------- ops

_BOXES = np.array([[[0.1, 0.2, 0.7, 0.9], [0.0, 0.0, 1.0, 1.0], [0.8, 0.6, 0.3, 0.1]],
                   [[0.25, 0.3, 0.5, 0.45], [-0.2, 0.1, 0.6, 1.3], [0.5, 0.5, 0.5, 0.5]]],
                  np.float32)


@pytest.mark.parametrize('crop_size', [[4, 3], [1, 1], [6, 6], [2, 8]])
def test_matmul_crop_and_resize_equals_crop_and_resize(crop_size):
  image = np.random.RandomState(0).normal(size=(2, 7, 9, 3)).astype(np.float32)
  with tf.Graph().as_default():
    got = two_stage_ops.matmul_crop_and_resize(tf.constant(image), tf.constant(_BOXES),
                                               crop_size)
    expected = two_stage_ops.native_crop_and_resize(tf.constant(image), tf.constant(_BOXES),
                                                    crop_size)
    assert got.shape.as_list() == [2, 3] + crop_size + [3]
    got, expected = _run([got, expected])
  np.testing.assert_allclose(got, expected, atol=1e-5)
  np.testing.assert_allclose(got[1, 0], _np_crop_and_resize(image[1], _BOXES[1, 0], crop_size),
                             atol=1e-5)


def test_matmul_crop_and_resize_extrapolates_and_takes_dynamic_sizes():
  image = np.random.RandomState(1).normal(size=(2, 5, 6, 2)).astype(np.float32)
  with tf.Graph().as_default():
    images = tf.compat.v1.placeholder(tf.float32, [None, None, None, 2])
    boxes = tf.compat.v1.placeholder(tf.float32, [None, None, 4])
    got = two_stage_ops.matmul_crop_and_resize(images, boxes, [3, 5], extrapolation_value=-7.)
    expected = tf.reshape(tf.image.crop_and_resize(
        images, tf.reshape(boxes, [-1, 4]), [0, 0, 0, 1, 1, 1], [3, 5],
        extrapolation_value=-7.), [2, 3, 3, 5, 2])
    got, expected = _run([got, expected], {images: image, boxes: _BOXES})
  assert (got == -7.).any()
  np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize('global_pool', [True, False])
def test_position_sensitive_crop_regions_by_hand(global_pool):
  # Channel group k of bin k holds k * 10 + a ramp, so every bin is distinguishable.
  rng = np.random.RandomState(2)
  image = rng.normal(size=(6, 8, 4 * 2)).astype(np.float32)
  image += np.repeat(np.arange(4) * 10.0, 2)[None, None, :].astype(np.float32)
  boxes = _BOXES[0]
  with tf.Graph().as_default():
    got = two_stage_ops.position_sensitive_crop_regions(
        tf.constant(image), tf.constant(boxes), crop_size=[4, 6], num_spatial_bins=[2, 2],
        global_pool=global_pool)
    got = _run(got)
  expected = _np_position_sensitive(image, boxes, [4, 6], [2, 2], global_pool)
  assert got.shape == ((3, 1, 1, 2) if global_pool else (3, 4, 6, 2))
  np.testing.assert_allclose(got, expected, atol=1e-4)


def test_position_sensitive_crop_of_a_constant_bin_layout():
  # Whole-image box, 2x1 bins: the top bin reads channel 0 (all 1s), the bottom
  # bin channel 1 (all 3s); pooled: their mean 2.
  image = np.concatenate([np.ones((4, 4, 1)), 3 * np.ones((4, 4, 1))], axis=2)
  with tf.Graph().as_default():
    pooled, tiled = _run([
        two_stage_ops.position_sensitive_crop_regions(
            tf.constant(image, tf.float32), tf.constant([[0., 0., 1., 1.]]), [2, 2], [2, 1],
            global_pool=pool) for pool in (True, False)])
  np.testing.assert_allclose(pooled.ravel(), [2.0])
  np.testing.assert_allclose(tiled[0, :, :, 0], [[1, 1], [3, 3]])


def test_batch_position_sensitive_crop_matches_per_image_crops():
  images = np.random.RandomState(3).normal(size=(2, 5, 5, 9)).astype(np.float32)
  with tf.Graph().as_default():
    batch = two_stage_ops.batch_position_sensitive_crop_regions(
        tf.constant(images), tf.constant(_BOXES), [3, 3], [3, 3], global_pool=True)
    single = [two_stage_ops.position_sensitive_crop_regions(
        tf.constant(images[i]), tf.constant(_BOXES[i]), [3, 3], [3, 3], True)
              for i in range(2)]
    assert batch.shape.as_list() == [2, 3, 1, 1, 1]
    batch, single = _run([batch, single])
  np.testing.assert_allclose(batch, np.stack(single), atol=1e-6)


def test_position_sensitive_crop_rejects_bad_bins():
  with tf.Graph().as_default():
    image, boxes = tf.zeros([4, 4, 8]), tf.zeros([1, 4])
    with pytest.raises(ValueError, match='crop_size'):
      two_stage_ops.position_sensitive_crop_regions(image, boxes, [5, 4], [2, 2], True)
    with pytest.raises(ValueError, match='num_spatial_bins'):
      two_stage_ops.position_sensitive_crop_regions(image, boxes, [3, 3], [3, 3], True)


# ---------------------------------------------------------------- Mask R-CNN predictor


def _mask_rcnn_predictor(num_classes, **kwargs):
  return predictors.MaskRCNNBoxPredictor(
      is_training=True, num_classes=num_classes, fc_hyperparams_fn=fc_hyperparams_fn,
      use_dropout=False, dropout_keep_prob=1.0, box_code_size=4,
      conv_hyperparams_fn=conv_hyperparams_fn, **kwargs)


def _build_both_stages(predictor, depth, crop=2):
  """Stage 2 then stage 3 under SCOPE, as the meta-architecture calls them."""
  features = tf.compat.v1.placeholder(tf.float32, [None, crop, crop, depth])
  stage2 = predictor.predict([features], [1], scope=SCOPE, prediction_stage=2)
  stage3 = predictor.predict([features], [1], scope=SCOPE, prediction_stage=3)
  return features, stage2, stage3


# (config, feature depth, predictor settings of its second_stage_box_predictor block)
_ZOO_LAYOUTS = [
    ('faster_rcnn_resnet50_coco.config', 2048, 90, {}),
    ('faster_rcnn_nas_coco.config', 4032, 90, {}),
    ('mask_rcnn_resnet50_atrous_coco.config', 2048, 90, dict(
        predict_instance_masks=True, mask_height=33, mask_width=33,
        mask_prediction_conv_depth=0, mask_prediction_num_conv_layers=4)),
    ('mask_rcnn_resnet101_pets.config', 2048, 37, dict(predict_instance_masks=True)),
    ('mask_rcnn_inception_v2_coco.config', 1024, 90, dict(
        predict_instance_masks=True, mask_height=15, mask_width=15,
        mask_prediction_conv_depth=0, mask_prediction_num_conv_layers=2)),
]


@pytest.mark.parametrize('config,depth,num_classes,settings', _ZOO_LAYOUTS,
                         ids=[layout[0] for layout in _ZOO_LAYOUTS])
def test_mask_rcnn_predictor_variables_equal_the_od_apis(config, depth, num_classes,
                                                        settings):
  with tf.Graph().as_default():
    _build_both_stages(_mask_rcnn_predictor(num_classes, **settings), depth)
    actual = zoo_testlib.graph_variables(SCOPE + '/')
  expected = zoo_testlib.reference_variables(config, prefix=SCOPE + '/')
  assert expected
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_derived_mask_conv_depth():
  assert predictors.derived_mask_conv_depth(2048, 90) == 256
  assert predictors.derived_mask_conv_depth(1024, 90) == 256
  assert predictors.derived_mask_conv_depth(64, 2) == 8   # 2 ** round((12 + 3) / 5)


def test_mask_rcnn_predictor_outputs_and_gradients():
  predictor = _mask_rcnn_predictor(5, predict_instance_masks=True, mask_height=6,
                                   mask_width=6, mask_prediction_conv_depth=8)
  with tf.Graph().as_default():
    features, stage2, stage3 = _build_both_stages(predictor, depth=16, crop=7)
    boxes = stage2[predictors.BOX_ENCODINGS][0]
    classes = stage2[predictors.CLASS_PREDICTIONS_WITH_BACKGROUND][0]
    masks = stage3[predictors.MASK_PREDICTIONS][0]
    loss = tf.reduce_sum(boxes) + tf.reduce_sum(classes) + tf.reduce_sum(masks ** 2)
    variables = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(loss, variables)
    assert len(variables) == 8 and None not in gradients
    feed = {features: np.random.RandomState(4).normal(size=(3, 7, 7, 16))}
    boxes, classes, masks, gradients = _run([boxes, classes, masks, gradients], feed)
  assert boxes.shape == (3, 1, 5, 4)
  assert classes.shape == (3, 1, 6)
  assert masks.shape == (3, 1, 5, 6, 6)
  assert all(np.isfinite(v).all() for v in [boxes, classes, masks] + gradients)
  assert all(np.abs(g).sum() > 0 for g in gradients)


def test_box_and_class_heads_read_the_spatial_mean():
  # A crop constant over space and its mean give the same predictions.
  predictor = _mask_rcnn_predictor(3)
  with tf.Graph().as_default():
    features = tf.compat.v1.placeholder(tf.float32, [None, None, None, 4])
    out = predictor.predict([features], [1], scope=SCOPE)
    values = np.random.RandomState(5).normal(size=(2, 3, 3, 4))
    mean = values.mean(axis=(1, 2), keepdims=True)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      full = sess.run(out, {features: values})
      pooled = sess.run(out, {features: mean})
  for key in full:
    np.testing.assert_allclose(full[key][0], pooled[key][0], atol=1e-5)


def test_mask_head_options():
  with tf.Graph().as_default():
    predictor = _mask_rcnn_predictor(
        4, predict_instance_masks=True, mask_height=14, mask_width=14,
        mask_prediction_conv_depth=8, masks_are_class_agnostic=True,
        share_box_across_classes=True, convolve_then_upsample_masks=True)
    _, stage2, stage3 = _build_both_stages(predictor, depth=16, crop=7)
    assert stage2[predictors.BOX_ENCODINGS][0].shape.as_list() == [None, 1, 1, 4]
    assert stage3[predictors.MASK_PREDICTIONS][0].shape.as_list() == [None, 1, 1, 14, 14]
    variables = zoo_testlib.graph_variables(SCOPE + '/Conv')
  # One conv at crop size, one after upsampling, then the prediction conv.
  assert variables == {
      SCOPE + '/Conv/weights': [3, 3, 16, 8], SCOPE + '/Conv/biases': [8],
      SCOPE + '/Conv_1/weights': [3, 3, 8, 8], SCOPE + '/Conv_1/biases': [8],
      SCOPE + '/Conv_2/weights': [3, 3, 8, 1], SCOPE + '/Conv_2/biases': [1]}


def test_mask_rcnn_predictor_rejects_bad_arguments():
  with pytest.raises(ValueError, match='conv_hyperparams_fn'):
    predictors.MaskRCNNBoxPredictor(True, 3, fc_hyperparams_fn, False, 1.0, 4,
                                    predict_instance_masks=True)
  predictor = _mask_rcnn_predictor(3)
  with tf.Graph().as_default():
    features = tf.zeros([1, 2, 2, 4])
    with pytest.raises(ValueError, match='num_predictions_per_location'):
      predictor.predict([features], [2])
    with pytest.raises(ValueError, match='image_features'):
      predictor.predict([features, features], [1])
    with pytest.raises(ValueError, match='prediction_stage'):
      predictor.predict([features], [1], prediction_stage=4)


# ---------------------------------------------------------------- R-FCN predictor


def _rfcn_predictor(num_classes, depth=1024, bins=(3, 3), crop_size=(18, 18)):
  return rfcn_box_predictor.RfcnBoxPredictor(
      is_training=True, num_classes=num_classes, conv_hyperparams_fn=conv_hyperparams_fn,
      num_spatial_bins=list(bins), depth=depth, crop_size=list(crop_size), box_code_size=4)


@pytest.mark.parametrize('config,num_classes', [('rfcn_resnet101_coco.config', 90),
                                                ('rfcn_resnet101_pets.config', 37)])
def test_rfcn_predictor_variables_equal_the_od_apis(config, num_classes):
  with tf.Graph().as_default():
    features = tf.compat.v1.placeholder(tf.float32, [None, None, None, 2048])
    proposals = tf.compat.v1.placeholder(tf.float32, [None, None, 4])
    _rfcn_predictor(num_classes).predict([features], [1], scope=SCOPE,
                                         proposal_boxes=proposals)
    actual = zoo_testlib.graph_variables(SCOPE + '/')
  expected = zoo_testlib.reference_variables(config, prefix=SCOPE + '/')
  assert zoo_testlib.layout_difference(expected, actual) == ''


def test_rfcn_predictor_pools_its_score_maps_position_sensitively():
  num_classes, bins, crop = 3, [2, 2], [4, 4]
  images = np.random.RandomState(6).normal(size=(2, 8, 8, 16)).astype(np.float32)
  with tf.Graph().as_default():
    out = _rfcn_predictor(num_classes, depth=8, bins=bins, crop_size=crop).predict(
        [tf.constant(images)], [1], scope=SCOPE, proposal_boxes=tf.constant(_BOXES))
    boxes = out[predictors.BOX_ENCODINGS][0]
    classes = out[predictors.CLASS_PREDICTIONS_WITH_BACKGROUND][0]
    assert boxes.shape.as_list() == [6, 1, 3, 4]
    graph = tf.compat.v1.get_default_graph()
    maps = [graph.get_tensor_by_name(SCOPE + '/%s/BiasAdd:0' % name)
            for name in ('refined_locations', 'class_predictions')]
    gradients = tf.gradients(tf.reduce_sum(boxes) + tf.reduce_sum(classes),
                             tf.compat.v1.trainable_variables())
    assert None not in gradients
    boxes, classes, (location_map, class_map) = _run([boxes, classes, maps])
  assert boxes.shape == (6, 1, 3, 4) and classes.shape == (6, 1, 4)
  assert location_map.shape[-1] == 4 * 3 * 4 and class_map.shape[-1] == 4 * 4
  for image in range(2):
    expected_boxes = _np_position_sensitive(location_map[image], _BOXES[image], crop, bins, True)
    expected_classes = _np_position_sensitive(class_map[image], _BOXES[image], crop, bins, True)
    np.testing.assert_allclose(boxes[image * 3:(image + 1) * 3].reshape(3, -1),
                               expected_boxes.reshape(3, -1), atol=1e-4)
    np.testing.assert_allclose(classes[image * 3:(image + 1) * 3].reshape(3, -1),
                               expected_classes.reshape(3, -1), atol=1e-4)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
