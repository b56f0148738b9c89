"""Tests for the two-stage minibatch sampler and the RPN's grid anchors."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from core import balanced_positive_negative_sampler as sampler_lib
from core import grid_anchor_generator

tf.compat.v1.disable_eager_execution()


def _run(fetches, feed_dict=None):
  with tf.compat.v1.Session() as sess:
    return sess.run(fetches, feed_dict=feed_dict)


# ---------------------------------------------------------------- sampler


def _draw(sampler, indicator, labels, batch_size, repeats=20):
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(3)
    sampled = sampler.subsample(tf.constant(indicator), batch_size, tf.constant(labels))
    assert sampled.shape.as_list() == [len(indicator)]
    with tf.compat.v1.Session() as sess:
      return [sess.run(sampled) for _ in range(repeats)]


def test_sampler_caps_positives_and_fills_with_negatives():
  labels = np.arange(100) < 30             # 30 positives, 70 negatives
  indicator = np.ones(100, bool)
  indicator[[0, 1, 50, 51]] = False        # never drawn
  for sampled in _draw(sampler_lib.BalancedPositiveNegativeSampler(0.25), indicator,
                       labels, batch_size=40):
    assert sampled.sum() == 40
    assert (sampled & labels).sum() == 10  # int(40 * 0.25)
    assert not (sampled & ~indicator).any()


def test_sampler_is_random():
  labels = np.arange(100) < 30
  draws = _draw(sampler_lib.BalancedPositiveNegativeSampler(0.5), np.ones(100, bool),
                labels, batch_size=20, repeats=5)
  assert len({d.tobytes() for d in draws}) > 1


def test_sampler_with_few_positives_takes_more_negatives():
  labels = np.arange(50) < 3
  for sampled in _draw(sampler_lib.BalancedPositiveNegativeSampler(0.5),
                       np.ones(50, bool), labels, batch_size=16, repeats=3):
    assert (sampled & labels).sum() == 3
    assert (sampled & ~labels).sum() == 13


def test_sampler_with_few_candidates_returns_fewer():
  indicator = np.arange(50) < 6
  labels = np.arange(50) % 2 == 0
  for sampled in _draw(sampler_lib.BalancedPositiveNegativeSampler(0.5), indicator,
                       labels, batch_size=16, repeats=3):
    np.testing.assert_array_equal(sampled, indicator)


def test_sampler_without_batch_size_keeps_positives_in_ratio():
  labels = np.arange(60) < 5
  for sampled in _draw(sampler_lib.BalancedPositiveNegativeSampler(0.25),
                       np.ones(60, bool), labels, batch_size=None, repeats=3):
    assert (sampled & labels).sum() == 5
    assert (sampled & ~labels).sum() == 15   # three negatives per positive


def test_static_sampler_draws_like_the_dynamic_one():
  labels = np.arange(100) < 30
  indicator = np.ones(100, bool)
  indicator[[0, 1, 50, 51]] = False
  sampler = sampler_lib.BalancedPositiveNegativeSampler(0.25, is_static=True)
  for sampled in _draw(sampler, indicator, labels, batch_size=40, repeats=5):
    assert sampled.sum() == 40
    assert (sampled & labels).sum() == 10
    assert not (sampled & ~indicator).any()


def test_static_sampler_always_fills_the_batch():
  sampler = sampler_lib.BalancedPositiveNegativeSampler(0.5, is_static=True)
  # Too few candidates: non-candidates pad the batch.
  indicator = np.arange(50) < 6
  for sampled in _draw(sampler, indicator, np.arange(50) % 2 == 0, 16, repeats=3):
    assert sampled.sum() == 16
    assert sampled[indicator].all()
  # No negatives at all: positives fill the batch.
  for sampled in _draw(sampler, np.ones(50, bool), np.ones(50, bool), 16, repeats=3):
    assert sampled.sum() == 16


def test_sampler_rejects_bad_arguments():
  with pytest.raises(ValueError, match='positive_fraction'):
    sampler_lib.BalancedPositiveNegativeSampler(1.5)
  sampler = sampler_lib.BalancedPositiveNegativeSampler()
  with tf.Graph().as_default():
    flags = tf.constant([True, False])
    with pytest.raises(ValueError, match='indicator'):
      sampler.subsample(tf.constant([[True]]), 4, tf.constant([True]))
    with pytest.raises(ValueError, match='labels'):
      sampler.subsample(flags, 4, tf.constant([1, 0]))
    static = sampler_lib.BalancedPositiveNegativeSampler(is_static=True)
    with pytest.raises(ValueError, match='batch_size'):
      static.subsample(flags, None, flags)
    zero = sampler_lib.BalancedPositiveNegativeSampler(0.0)
    with pytest.raises(ValueError, match='positive_fraction'):
      zero.subsample(flags, None, flags)


# ---------------------------------------------------------------- anchors


def _od_formula_anchors(height, width, scales, ratios, base, stride, offset):
  """The OD API's grid anchors, written out with numpy for the comparison."""
  scale_grid, ratio_grid = np.meshgrid(scales, ratios)     # [ratios, scales]
  scale_grid, ratio_grid = scale_grid.ravel(), ratio_grid.ravel()
  heights = scale_grid / np.sqrt(ratio_grid) * base[0]
  widths = scale_grid * np.sqrt(ratio_grid) * base[1]
  boxes = []
  for i in range(height):
    for j in range(width):
      cy, cx = offset[0] + i * stride[0], offset[1] + j * stride[1]
      for h, w in zip(heights, widths):
        boxes.append([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2])
  return np.array(boxes, np.float32)


def test_grid_anchors_on_a_2x2_grid_by_hand():
  generator = grid_anchor_generator.GridAnchorGenerator(
      scales=(0.5, 1.0), aspect_ratios=(1.0, 4.0), base_anchor_size=[10, 20],
      anchor_stride=[8, 6], anchor_offset=[2, 3])
  assert generator.num_anchors_per_location() == [4]
  with tf.Graph().as_default():
    anchors = generator.generate([(2, 2)])
    assert anchors.shape.as_list() == [16, 4]
    anchors = _run(anchors)
  # Per cell (h, w): (5, 10) s=.5 a=1; (10, 20) s=1 a=1; (2.5, 20) s=.5 a=4; (5, 40) s=1 a=4.
  cell = np.array([[-2.5, -5, 2.5, 5], [-5, -10, 5, 10],
                   [-1.25, -10, 1.25, 10], [-2.5, -20, 2.5, 20]])
  expected = np.concatenate([cell + [cy, cx, cy, cx]
                             for cy, cx in [(2, 3), (2, 9), (10, 3), (10, 9)]])
  np.testing.assert_allclose(anchors, expected, atol=1e-5)


def test_grid_anchors_match_the_od_formula_with_dynamic_sizes():
  scales, ratios = (0.25, 0.5, 1.0, 2.0), (0.5, 1.0, 2.0)
  generator = grid_anchor_generator.GridAnchorGenerator(scales, ratios,
                                                        anchor_stride=[16, 16])
  with tf.Graph().as_default():
    height = tf.compat.v1.placeholder(tf.int32, [])
    width = tf.compat.v1.placeholder(tf.int32, [])
    anchors = generator.generate([(height, width)])
    assert anchors.shape.as_list() == [None, 4]
    got = _run(anchors, {height: 3, width: 5})
  expected = _od_formula_anchors(3, 5, scales, ratios, [256, 256], [16, 16], [0, 0])
  assert got.shape == (3 * 5 * 12, 4)
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-4)
  # First anchor: scale 0.25, ratio 0.5 at (0, 0): h = 64 * sqrt(2), w = 64 / sqrt(2).
  np.testing.assert_allclose(got[0], [-32 * np.sqrt(2), -32 / np.sqrt(2),
                                      32 * np.sqrt(2), 32 / np.sqrt(2)], rtol=1e-6)


def test_grid_anchors_reject_several_feature_maps():
  generator = grid_anchor_generator.GridAnchorGenerator()
  with pytest.raises(ValueError, match='feature_map_shape_list'):
    generator.generate([(2, 2), (1, 1)])


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
