"""Tests of core/target_assigner.py on hand-checked anchors and boxes."""

import numpy as np
import tensorflow as tf

from core import box_coder
from core import matcher
from core import target_assigner

tf.compat.v1.disable_eager_execution()

ANCHORS = [[0.0, 0.0, 0.5, 0.5],
           [0.5, 0.5, 1.0, 1.0],
           [0.0, 0.5, 0.5, 1.0],
           [0.5, 0.0, 1.0, 0.5]]


class TargetAssignerTest(tf.test.TestCase):

  def _assigner(self):
    return target_assigner.TargetAssigner(matcher.ArgMaxMatcher(0.5, 0.3),
                                          box_coder.FasterRcnnBoxCoder())

  def test_assign(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.0, 0.0, 0.5, 0.5],      # == anchor 0
                           [0.5, 0.55, 1.0, 1.0]])    # IoU 0.9 with anchor 1
      labels = tf.constant([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
      outputs = self._assigner().assign(tf.constant(ANCHORS), boxes, labels,
                                        unmatched_class_label=tf.constant([1.0, 0.0, 0.0]))
      with tf.compat.v1.Session() as sess:
        cls_t, cls_w, reg_t, reg_w = sess.run(outputs[:4])
    self.assertAllClose(cls_t, [[0, 1, 0], [0, 0, 1], [1, 0, 0], [1, 0, 0]])
    self.assertAllClose(cls_w, [1, 1, 1, 1])
    self.assertAllClose(reg_w, [1, 1, 0, 0])
    self.assertAllClose(reg_t[0], [0, 0, 0, 0], atol=1e-4)
    # Anchor 1 (centre 0.75, 0.75, size 0.5): box centre x 0.775, width 0.45.
    self.assertAllClose(reg_t[1], [0.0, 0.025 / 0.5 * 10, 0.0, np.log(0.45 / 0.5) * 5],
                        atol=1e-4)
    self.assertAllClose(reg_t[2:], np.zeros([2, 4]))

  def test_ignored_anchor_has_zero_class_weight(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.0, 0.0, 0.5, 0.3]])    # IoU 0.6 with anchor 0
      outputs = self._assigner().assign(tf.constant(ANCHORS[:1]), boxes)
      box = tf.constant([[0.0, 0.0, 0.5, 0.2]])      # IoU 0.4: ignored
      ignored = self._assigner().assign(tf.constant(ANCHORS[:1]), box)
      with tf.compat.v1.Session() as sess:
        (_, cls_w, _, reg_w), (_, cls_w2, _, reg_w2) = sess.run([outputs[:4], ignored[:4]])
    self.assertAllClose([cls_w[0], reg_w[0]], [1.0, 1.0])
    self.assertAllClose([cls_w2[0], reg_w2[0]], [0.0, 0.0])

  def test_groundtruth_weights(self):
    with tf.Graph().as_default():
      boxes = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
      outputs = self._assigner().assign(tf.constant(ANCHORS), boxes,
                                        groundtruth_weights=tf.constant([0.5, 0.0]))
      with tf.compat.v1.Session() as sess:
        _, cls_w, _, reg_w = sess.run(outputs[:4])
    # A zero-weight box matches nothing: anchor 1 becomes a negative.
    self.assertAllClose(reg_w, [0.5, 0, 0, 0])
    self.assertAllClose(cls_w, [0.5, 1, 1, 1])

  def test_batch_with_empty_image(self):
    with tf.Graph().as_default():
      targets = target_assigner.batch_assign_targets(
          self._assigner(), tf.constant(ANCHORS),
          [tf.constant([[0.5, 0.0, 1.0, 0.5]]), tf.zeros([0, 4])],
          [tf.constant([[0.0, 1.0]]), tf.zeros([0, 2])],
          unmatched_class_label=tf.constant([1.0, 0.0]))
      with tf.compat.v1.Session() as sess:
        cls_t, reg_w = sess.run([targets.cls_targets, targets.reg_weights])
    self.assertEqual(cls_t.shape, (2, 4, 2))
    self.assertAllClose(reg_w, [[0, 0, 0, 1], [0, 0, 0, 0]])
    self.assertAllClose(cls_t[1], [[1, 0]] * 4)
    self.assertEqual(len(targets.matches), 2)


if __name__ == '__main__':
  tf.test.main()
