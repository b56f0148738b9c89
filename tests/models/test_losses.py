"""Tests of core/losses.py and core/hard_example_miner.py against hand-computed numbers."""

import math

import numpy as np
import tensorflow as tf

from core import hard_example_miner
from core import losses
from core import matcher

tf.compat.v1.disable_eager_execution()


def _run(tensors):
  with tf.compat.v1.Session() as sess:
    return sess.run(tensors)


def _sigmoid_xent(logit, label):
  p = 1.0 / (1.0 + math.exp(-logit))
  return -(label * math.log(p) + (1 - label) * math.log(1 - p))


class LossesTest(tf.test.TestCase):

  def test_smooth_l1(self):
    with tf.Graph().as_default():
      prediction = tf.constant([[[0.0, 0.5, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]]])
      target = tf.zeros([1, 2, 4])
      loss = losses.WeightedSmoothL1LocalizationLoss()(prediction, target,
                                                       weights=tf.constant([[1.0, 0.5]]))
      out = _run(loss)
    # 0.5 * 0.5^2 + (2 - 0.5) = 1.625; anchor 2: 4 * 0.5 = 2, weighted 0.5 -> 1.
    self.assertAllClose(out, [[1.625, 1.0]])

  def test_smooth_l1_delta_and_nan_targets(self):
    with tf.Graph().as_default():
      prediction = tf.constant([[[0.2, 0.0, 0.0, 3.0]]])
      target = tf.constant([[[0.0, float('nan'), 0.0, 0.0]]])
      loss = losses.WeightedSmoothL1LocalizationLoss(delta=0.5)(
          prediction, target, ignore_nan_targets=True, weights=tf.ones([1, 1]))
      out = _run(loss)
    # 0.5 * 0.04 / 0.5 = 0.04; 3 - 0.25 = 2.75.
    self.assertAllClose(out, [[2.79]])

  def test_sigmoid(self):
    with tf.Graph().as_default():
      logits = tf.constant([[[2.0, -1.0], [0.0, 3.0]]])
      labels = tf.constant([[[1.0, 0.0], [0.0, 1.0]]])
      loss = losses.WeightedSigmoidClassificationLoss()(logits, labels,
                                                        weights=tf.constant([[1.0, 2.0]]))
      out = _run(loss)
    expected = [[[_sigmoid_xent(2, 1), _sigmoid_xent(-1, 0)],
                 [2 * _sigmoid_xent(0, 0), 2 * _sigmoid_xent(3, 1)]]]
    self.assertAllClose(out, expected)

  def test_focal_reduces_easy_examples(self):
    with tf.Graph().as_default():
      logits = tf.constant([[[4.0], [-0.5]]])
      labels = tf.constant([[[1.0], [1.0]]])
      loss = losses.SigmoidFocalClassificationLoss(gamma=2.0, alpha=None)(
          logits, labels, weights=tf.ones([1, 2]))
      out = _run(loss)
    p_easy = 1 / (1 + math.exp(-4.0))
    p_hard = 1 / (1 + math.exp(0.5))
    self.assertAllClose(out[0, :, 0], [(1 - p_easy) ** 2 * -math.log(p_easy),
                                       (1 - p_hard) ** 2 * -math.log(p_hard)], rtol=1e-4)

  def test_softmax(self):
    with tf.Graph().as_default():
      logits = tf.constant([[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]])
      labels = tf.constant([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
      loss = losses.WeightedSoftmaxClassificationLoss(logit_scale=2.0)(
          logits, labels, weights=tf.constant([[1.0, 0.5]]))
      out = _run(loss)
    scaled = np.array([0.5, 1.0, 1.5])
    first = -(scaled[2] - np.log(np.exp(scaled).sum()))
    self.assertAllClose(out, [[first, 0.5 * math.log(3.0)]], rtol=1e-5)


class HardExampleMinerTest(tf.test.TestCase):

  def test_selects_highest_losses(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.0, 0.0, 0.2, 0.2], [0.5, 0.5, 0.7, 0.7],
                           [0.0, 0.5, 0.2, 0.7], [0.5, 0.0, 0.7, 0.2]])
      cls_losses = tf.constant([[1.0, 5.0, 3.0, 0.5]])
      loc_losses = tf.constant([[0.1, 0.2, 0.3, 0.4]])
      miner = hard_example_miner.HardExampleMiner(num_hard_examples=2, iou_threshold=0.5,
                                                  loss_type='cls')
      loc, cls = _run(miner(loc_losses, cls_losses, [boxes]))
    self.assertAllClose([loc, cls], [0.5, 8.0])

  def test_nms_drops_overlapping_duplicates(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.5, 0.51], [0.5, 0.5, 1.0, 1.0]])
      miner = hard_example_miner.HardExampleMiner(num_hard_examples=2, iou_threshold=0.5,
                                                  loss_type='cls')
      _, cls = _run(miner(tf.zeros([1, 3]), tf.constant([[3.0, 2.0, 1.0]]), [boxes]))
    self.assertAllClose(cls, 4.0)

  def test_negatives_per_positive(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.1 * i, 0.0, 0.1 * i + 0.05, 0.05] for i in range(6)])
      match = matcher.Match(tf.constant([0, -1, -1, -1, -1, -2]))
      cls_losses = tf.constant([[0.5, 6.0, 5.0, 4.0, 3.0, 9.0]])
      miner = hard_example_miner.HardExampleMiner(
          num_hard_examples=None, iou_threshold=0.9, loss_type='cls',
          max_negatives_per_positive=2, min_negatives_per_image=0)
      _, cls = miner(tf.zeros([1, 6]), cls_losses, [boxes], [match])
      miner.summarize()
      out = _run(cls)
    # The positive (0.5) plus the two hardest negatives (6 + 5); ignored 9 dropped.
    self.assertAllClose(out, 11.5)

  def test_bad_loss_type(self):
    with self.assertRaisesRegex(ValueError, 'loss_type'):
      hard_example_miner.HardExampleMiner(loss_type='all')


if __name__ == '__main__':
  tf.test.main()
