"""Tests of core/box_coder.py: Faster R-CNN encoding values and round trips."""

import math

import numpy as np
import tensorflow as tf

from core import box_coder

tf.compat.v1.disable_eager_execution()


class FasterRcnnBoxCoderTest(tf.test.TestCase):

  def test_encode_values(self):
    with tf.Graph().as_default():
      coder = box_coder.FasterRcnnBoxCoder()
      anchors = tf.constant([[0.0, 0.0, 0.5, 0.5]])
      boxes = tf.constant([[0.1, 0.0, 0.6, 1.0]])
      with tf.compat.v1.Session() as sess:
        codes = sess.run(coder.encode(boxes, anchors))
    # Centres (0.35, 0.5) vs (0.25, 0.25); sizes (0.5, 1.0) vs (0.5, 0.5).
    self.assertAllClose(codes[0], [0.1 / 0.5 * 10, 0.25 / 0.5 * 10, 0.0, math.log(2.0) * 5],
                        atol=1e-4)

  def test_round_trip(self):
    rng = np.random.RandomState(0)
    corners = np.sort(rng.uniform(0, 1, (20, 2, 2)), axis=1)
    boxes = np.stack([corners[:, 0, 0], corners[:, 0, 1], corners[:, 1, 0], corners[:, 1, 1]],
                     axis=1).astype(np.float32)
    anchors = np.clip(boxes + rng.uniform(-0.1, 0.1, boxes.shape), 0, 1).astype(np.float32)
    anchors[:, 2:] = np.maximum(anchors[:, 2:], anchors[:, :2] + 0.05)
    for scales in [(10.0, 10.0, 5.0, 5.0), None]:
      with tf.Graph().as_default():
        coder = box_coder.FasterRcnnBoxCoder(scales)
        decoded = coder.decode(coder.encode(boxes, anchors), anchors)
        with tf.compat.v1.Session() as sess:
          self.assertAllClose(sess.run(decoded), boxes, atol=1e-5)

  def test_batch_decode(self):
    with tf.Graph().as_default():
      coder = box_coder.FasterRcnnBoxCoder()
      anchors = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
      decoded = box_coder.batch_decode(coder, tf.zeros([3, 2, 4]), anchors)
      with tf.compat.v1.Session() as sess:
        out = sess.run(decoded)
    self.assertEqual(out.shape, (3, 2, 4))
    self.assertAllClose(out[2], [[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]], atol=1e-6)

  def test_bad_scales(self):
    with self.assertRaisesRegex(ValueError, 'scale_factors'):
      box_coder.FasterRcnnBoxCoder([1.0, 2.0])


if __name__ == '__main__':
  tf.test.main()
