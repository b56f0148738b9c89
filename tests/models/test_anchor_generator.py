"""Tests of core/anchor_generator.py: counts, values and layouts of anchors."""

import math

import numpy as np
import tensorflow as tf

from core import anchor_generator

tf.compat.v1.disable_eager_execution()


class AnchorGeneratorTest(tf.test.TestCase):

  def _run(self, tensor):
    with tf.compat.v1.Session() as sess:
      return sess.run(tensor)

  def test_single_layer_values(self):
    with tf.Graph().as_default():
      generator = anchor_generator.MultipleGridAnchorGenerator([[(0.5, 1.0)]])
      anchors = self._run(generator.generate([(2, 2)]))
    expected = [[0.0, 0.0, 0.5, 0.5], [0.0, 0.5, 0.5, 1.0],
                [0.5, 0.0, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0]]
    self.assertAllClose(anchors, expected)

  def test_aspect_ratio_shapes(self):
    with tf.Graph().as_default():
      generator = anchor_generator.MultipleGridAnchorGenerator([[(0.4, 4.0), (0.4, 0.25)]])
      anchors = self._run(generator.generate([(1, 1)]))
    # aspect 4: height 0.4 / 2, width 0.4 * 2, centred at 0.5.
    self.assertAllClose(anchors[0], [0.4, 0.1, 0.6, 0.9])
    self.assertAllClose(anchors[1], [0.1, 0.4, 0.9, 0.6])

  def test_ssd_layout_counts(self):
    generator = anchor_generator.create_ssd_anchors(
        num_layers=3, min_scale=0.2, max_scale=0.8, aspect_ratios=(1.0, 2.0, 0.5))
    self.assertEqual(generator.num_anchors_per_location(), [3, 4, 4])
    with tf.Graph().as_default():
      anchors = self._run(generator.generate([(4, 4), (2, 2), (1, 1)]))
    self.assertEqual(anchors.shape, (4 * 4 * 3 + 2 * 2 * 4 + 1 * 4, 4))

  def test_ssd_scales(self):
    generator = anchor_generator.create_ssd_anchors(
        num_layers=3, min_scale=0.2, max_scale=0.8, aspect_ratios=(1.0,),
        reduce_boxes_in_lowest_layer=False)
    sizes = generator.anchor_sizes()
    # Layer scales 0.2, 0.5, 0.8; the extra anchor is sqrt(s_k * s_k+1).
    self.assertAllClose(sizes[0], [[0.2, 0.2], [math.sqrt(0.1), math.sqrt(0.1)]])
    self.assertAllClose(sizes[1][0], [0.5, 0.5])
    self.assertAllClose(sizes[2], [[0.8, 0.8], [math.sqrt(0.8), math.sqrt(0.8)]])

  def test_reduced_lowest_layer(self):
    generator = anchor_generator.create_ssd_anchors(num_layers=2, min_scale=0.3,
                                                    max_scale=0.6)
    sizes = generator.anchor_sizes()[0]
    self.assertAllClose(sizes[0], [0.1, 0.1])
    self.assertAllClose(sizes[1], [0.3 / math.sqrt(2), 0.3 * math.sqrt(2)])

  def test_non_square_image_keeps_pixel_aspect(self):
    generator = anchor_generator.MultipleGridAnchorGenerator([[(0.5, 1.0)]])
    height, width = generator.anchor_sizes(im_height=100, im_width=200)[0][0]
    self.assertAllClose([height * 100, width * 200], [50.0, 50.0])

  def test_order_matches_predictor_reshape(self):
    boxes = anchor_generator.grid_anchors(2, 3, np.array([[0.1, 0.1], [0.2, 0.2]], np.float32))
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    # Row-major over cells, anchors innermost.
    self.assertAllClose(centres[0], centres[1])
    self.assertAllClose(centres[2], [0.25, 0.5])
    self.assertAllClose(centres[6], [0.75, 1.0 / 6])

  def test_errors(self):
    generator = anchor_generator.create_ssd_anchors(num_layers=2)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, 'num_layers'):
        generator.generate([(2, 2)])
    with self.assertRaisesRegex(ValueError, 'num_layers'):
      anchor_generator.create_ssd_anchors(num_layers=0)
    with self.assertRaisesRegex(ValueError, 'box_specs_list'):
      anchor_generator.MultipleGridAnchorGenerator([])


if __name__ == '__main__':
  tf.test.main()
