"""Tests of core/post_processing.py: score converters and batch NMS."""

import numpy as np
import tensorflow as tf

from core import post_processing

tf.compat.v1.disable_eager_execution()


def _run(tensors):
  with tf.compat.v1.Session() as sess:
    return sess.run(tensors)


class PostProcessingTest(tf.test.TestCase):

  def test_score_converters(self):
    with tf.Graph().as_default():
      logits = tf.constant([[[0.0, 2.0]]])
      out = _run([post_processing.score_converter_fn('IDENTITY')(logits),
                  post_processing.score_converter_fn('sigmoid', logit_scale=2.0)(logits),
                  post_processing.score_converter_fn('SOFTMAX')(logits)])
    self.assertAllClose(out[0], [[[0.0, 2.0]]])
    self.assertAllClose(out[1], [[[0.5, 1 / (1 + np.exp(-1.0))]]])
    self.assertAllClose(out[2][0, 0], np.exp([0, 2]) / np.exp([0, 2]).sum())
    with self.assertRaisesRegex(ValueError, 'score_converter'):
      post_processing.score_converter_fn('RELU')

  def test_batch_nms(self):
    boxes = np.array([[[0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.5, 0.55], [0.5, 0.5, 1.0, 1.0]],
                      [[0.1, 0.1, 0.2, 0.2], [0.6, 0.6, 0.9, 0.9], [0.0, 0.0, 1.0, 1.0]]],
                     np.float32)
    scores = np.array([[[0.9, 0.1], [0.8, 0.2], [0.05, 0.7]],
                       [[0.3, 0.0], [0.0, 0.0], [0.0, 0.0]]], np.float32)
    with tf.Graph().as_default():
      nms = post_processing.non_max_suppression_fn(score_thresh=0.15, iou_thresh=0.5,
                                                   max_size_per_class=5, max_total_size=4)
      out_boxes, out_scores, out_classes, num = _run(nms(boxes, scores))
    self.assertEqual(out_boxes.shape, (2, 4, 4))
    self.assertAllEqual(num, [3, 1])
    # Image 0: class 0 keeps box 0 (box 1 suppressed); class 1 keeps boxes 2 and 1.
    self.assertAllClose(out_scores[0], [0.9, 0.7, 0.2, 0.0])
    self.assertAllClose(out_classes[0][:3], [0, 1, 1])
    self.assertAllClose(out_boxes[0][0], [0.0, 0.0, 0.5, 0.5])
    self.assertAllClose(out_boxes[1][0], [0.1, 0.1, 0.2, 0.2])
    self.assertAllClose(out_scores[1][1:], [0, 0, 0])

  def test_clip_window_and_coordinate_frame(self):
    boxes = np.array([[[0.2, 0.2, 0.8, 0.8]]], np.float32)
    scores = np.array([[[0.9]]], np.float32)
    with tf.Graph().as_default():
      out = _run(post_processing.batch_multiclass_non_max_suppression(
          boxes, scores, 0.0, 0.5, 1, 1, clip_window=tf.constant([[0.0, 0.0, 0.5, 0.5]]),
          change_coordinate_frame=True))
    self.assertAllClose(out[0][0, 0], [0.4, 0.4, 1.0, 1.0])

  def test_bad_threshold(self):
    with self.assertRaisesRegex(ValueError, 'iou_thresh'):
      post_processing.batch_multiclass_non_max_suppression(
          tf.zeros([1, 1, 4]), tf.zeros([1, 1, 1]), 0.0, 1.5, 1)


if __name__ == '__main__':
  tf.test.main()
