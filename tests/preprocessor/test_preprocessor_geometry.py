"""Tests of core.preprocessor: dispatcher, flips, rotation, jitter, pixel ops.

Boxes are checked against hand-computed values, and geometric steps are
checked for consistency: a box's pixels in the image (and its mask) must land
where the transformed box says.
"""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

from core import preprocessor  # noqa: E402
from core import standard_fields as fields  # noqa: E402
from core.preprocessor_cache import PreprocessorCache  # noqa: E402

F = fields.InputDataFields

BOXES = np.array([[0.0, 0.0, 0.75, 0.75], [0.25, 0.5, 0.75, 1.0]], np.float32)
KEYPOINTS = np.array([[[0.1, 0.2], [0.3, 0.4]], [[0.5, 0.6], [0.7, 0.8]]],
                     np.float32)


def _box_image(boxes, height, width, channels=3):
  """Float image (and masks) where box i's pixels hold value i + 1."""
  image = np.zeros([height, width, channels], np.float32)
  masks = np.zeros([len(boxes), height, width], np.float32)
  for i, (ymin, xmin, ymax, xmax) in enumerate(boxes):
    rows = slice(int(round(ymin * height)), int(round(ymax * height)))
    cols = slice(int(round(xmin * width)), int(round(xmax * width)))
    image[rows, cols, :] = i + 1
    masks[i, rows, cols] = 1.0
  return image, masks


def _pixel_box(mask):
  """Normalized [ymin, xmin, ymax, xmax] of the nonzero pixels of a 2-D mask."""
  rows = np.where(mask.any(axis=1))[0]
  cols = np.where(mask.any(axis=0))[0]
  height, width = mask.shape
  return np.array([rows[0] / height, cols[0] / width, (rows[-1] + 1) / height,
                   (cols[-1] + 1) / width], np.float32)


class FlipRotateTest(tf.test.TestCase):

  def _run_geometry(self, func, **kwargs):
    image, masks = _box_image(BOXES[1:], 8, 8)
    outputs = func(tf.constant(image), tf.constant(BOXES), tf.constant(masks),
                   tf.constant(KEYPOINTS), tf.ones([2, 2], tf.bool), **kwargs)
    return image, masks, self.evaluate(outputs)

  def test_horizontal_flip_boxes_image_masks_keypoints(self):
    image, masks, (new_image, boxes, new_masks, keypoints, vis) = self._run_geometry(
        preprocessor.random_horizontal_flip, keypoint_flip_permutation=[1, 0],
        probability=1.0)
    self.assertAllClose(boxes, [[0.0, 0.25, 0.75, 1.0], [0.25, 0.0, 0.75, 0.5]])
    self.assertAllEqual(new_image, image[:, ::-1, :])
    self.assertAllEqual(new_masks, masks[:, :, ::-1])
    # x -> 1 - x, then keypoints 0 and 1 swap places.
    self.assertAllClose(keypoints, [[[0.3, 0.6], [0.1, 0.8]], [[0.7, 0.2], [0.5, 0.4]]])
    self.assertAllEqual(vis, np.ones([2, 2], bool))
    # The pixels of box 1 are where the flipped box says.
    self.assertAllClose(_pixel_box(new_image[:, :, 0] == 1), boxes[1])
    self.assertAllClose(_pixel_box(new_masks[0] > 0), boxes[1])

  def test_vertical_flip(self):
    image, masks, (new_image, boxes, new_masks, keypoints, _) = self._run_geometry(
        preprocessor.random_vertical_flip, keypoint_flip_permutation=[0, 1],
        probability=1.0)
    self.assertAllClose(boxes, [[0.25, 0.0, 1.0, 0.75], [0.25, 0.5, 0.75, 1.0]])
    self.assertAllEqual(new_image, image[::-1])
    self.assertAllEqual(new_masks, masks[:, ::-1])
    self.assertAllClose(keypoints, [[[0.9, 0.2], [0.7, 0.4]], [[0.5, 0.6], [0.3, 0.8]]])

  def test_rotation90_counter_clockwise(self):
    image = np.zeros([4, 8, 3], np.float32)
    image[1:3, 4:8] = 1.0  # box [0.25, 0.5, 0.75, 1.0]
    masks = image[None, :, :, 0].copy()
    new_image, boxes, new_masks, keypoints = self.evaluate(
        preprocessor.random_rotation90(
            tf.constant(image), tf.constant(BOXES[1:]), tf.constant(masks),
            tf.constant(KEYPOINTS[:1]), probability=1.0))
    self.assertAllEqual(new_image.shape, [8, 4, 3])
    self.assertAllEqual(new_image, np.rot90(image))
    self.assertAllClose(boxes, [[0.0, 0.25, 0.5, 0.75]])
    self.assertAllClose(_pixel_box(new_image[:, :, 0] > 0), boxes[0])
    self.assertAllClose(_pixel_box(new_masks[0] > 0), boxes[0])
    # (y, x) -> (1 - x, y).
    self.assertAllClose(keypoints, [[[0.8, 0.1], [0.6, 0.3]]])

  def test_no_flip_with_probability_zero(self):
    image, _, (new_image, boxes, _, _, _) = self._run_geometry(
        preprocessor.random_horizontal_flip, keypoint_flip_permutation=[1, 0],
        probability=0.0)
    self.assertAllEqual(new_image, image)
    self.assertAllClose(boxes, BOXES)

  def test_flip_draw_comes_from_cache(self):
    cache = PreprocessorCache()
    cache.update(PreprocessorCache.HORIZONTAL_FLIP, '', tf.constant(0.2))
    boxes = preprocessor.random_horizontal_flip(
        tf.zeros([4, 4, 3]), tf.constant(BOXES), preprocess_vars_cache=cache)[1]
    self.assertAllClose(self.evaluate(boxes)[0], [0.0, 0.25, 0.75, 1.0])
    cache.update(PreprocessorCache.HORIZONTAL_FLIP, '', tf.constant(0.7))
    boxes = preprocessor.random_horizontal_flip(
        tf.zeros([4, 4, 3]), tf.constant(BOXES), preprocess_vars_cache=cache)[1]
    self.assertAllClose(self.evaluate(boxes), BOXES)

  def test_flip_requires_permutation_with_keypoints(self):
    with self.assertRaisesRegex(ValueError, 'keypoint_flip_permutation'):
      preprocessor.random_horizontal_flip(tf.zeros([4, 4, 3]), tf.constant(BOXES),
                                          keypoints=tf.constant(KEYPOINTS))

  def test_image_only_flip_returns_tensor(self):
    flipped = preprocessor.random_horizontal_flip(tf.zeros([4, 4, 3]))
    self.assertIsInstance(flipped, tf.Tensor)


class BoxOpsTest(tf.test.TestCase):

  def test_jitter_with_known_draws(self):
    cache = PreprocessorCache()
    draws = np.array([[0.05, -0.05, 0.05, -0.05], [-0.02, 0.0, 0.01, 0.05]], np.float32)
    cache.update(PreprocessorCache.JITTER_BOXES, '', tf.constant(draws))
    jittered = self.evaluate(preprocessor.random_jitter_boxes(
        tf.constant(BOXES), ratio=0.05, preprocess_vars_cache=cache))
    # box 0: h = w = 0.75; box 1: h = 0.5, w = 0.5; clipped to [0, 1].
    self.assertAllClose(jittered, [[0.0375, 0.0, 0.7875, 0.7125],
                                   [0.24, 0.5, 0.755, 1.0]])

  def test_jitter_bounds(self):
    boxes = np.random.RandomState(3).uniform(0.0, 0.5, [50, 2]).astype(np.float32)
    boxes = np.concatenate([boxes, boxes + 0.4], axis=1)
    jittered = self.evaluate(preprocessor.random_jitter_boxes(tf.constant(boxes),
                                                              ratio=0.1, seed=4))
    size = np.tile(boxes[:, 2:] - boxes[:, :2], [1, 2])
    self.assertTrue(np.all(np.abs(jittered - boxes) <= 0.1 * size + 1e-6))
    self.assertTrue(np.all((jittered >= 0.0) & (jittered <= 1.0)))
    self.assertFalse(np.allclose(jittered, boxes))

  def test_scale_boxes_to_pixel_coordinates(self):
    image, boxes, keypoints = self.evaluate(preprocessor.scale_boxes_to_pixel_coordinates(
        tf.zeros([20, 40, 3]), tf.constant([[0.1, 0.2, 0.4, 0.6]]),
        tf.constant([[[0.5, 0.25]]])))
    self.assertAllEqual(image.shape, [20, 40, 3])
    self.assertAllClose(boxes, [[2.0, 8.0, 8.0, 24.0]])
    self.assertAllClose(keypoints, [[[10.0, 10.0]]])


class PixelOpsTest(tf.test.TestCase):

  def _image(self):
    return np.random.RandomState(0).uniform(0, 255, [6, 8, 3]).astype(np.float32)

  def test_normalize_image(self):
    out = self.evaluate(preprocessor.normalize_image(
        tf.constant([[[0.0, 127.5, 255.0]]]), original_minval=0.0,
        original_maxval=255.0, target_minval=-1.0, target_maxval=1.0))
    self.assertAllClose(out, [[[-1.0, 0.0, 1.0]]])

  def test_brightness_from_cache_and_clipping(self):
    cache = PreprocessorCache()
    cache.update(PreprocessorCache.ADJUST_BRIGHTNESS, '', tf.constant(0.1))
    out = self.evaluate(preprocessor.random_adjust_brightness(
        tf.constant([[[0.0, 100.0, 250.0]]]), preprocess_vars_cache=cache))
    self.assertAllClose(out, [[[25.5, 125.5, 255.0]]], atol=1e-3)

  def test_photometric_ops_stay_in_range_and_change_image(self):
    image = self._image()
    for func in (preprocessor.random_adjust_brightness,
                 preprocessor.random_adjust_contrast,
                 preprocessor.random_adjust_hue,
                 preprocessor.random_adjust_saturation,
                 preprocessor.random_distort_color,
                 preprocessor.random_pixel_value_scale):
      out = self.evaluate(func(tf.constant(image)))
      self.assertEqual(out.shape, image.shape, func.__name__)
      self.assertTrue(np.all((out >= 0.0) & (out <= 255.0)), func.__name__)
      self.assertFalse(np.allclose(out, image), func.__name__)

  def test_pixel_value_scale_range(self):
    image = self._image() / 2.0
    out = self.evaluate(preprocessor.random_pixel_value_scale(tf.constant(image)))
    ratio = out / np.maximum(image, 1e-6)
    self.assertTrue(np.all((ratio >= 0.9 - 1e-5) & (ratio <= 1.1 + 1e-5)))

  def test_distort_color_bad_ordering(self):
    with self.assertRaisesRegex(ValueError, 'color_ordering'):
      preprocessor.random_distort_color(tf.zeros([2, 2, 3]), color_ordering=2)

  def test_rgb_to_gray(self):
    image = self._image()
    gray = self.evaluate(preprocessor.rgb_to_gray(tf.constant(image)))
    self.assertAllEqual(gray.shape, [6, 8, 1])
    always = self.evaluate(preprocessor.random_rgb_to_gray(tf.constant(image),
                                                           probability=1.0))
    self.assertAllClose(always[:, :, 0], gray[:, :, 0], atol=1e-3)
    self.assertAllClose(always[:, :, 1], always[:, :, 2])
    never = self.evaluate(preprocessor.random_rgb_to_gray(tf.constant(image),
                                                          probability=0.0))
    self.assertAllEqual(never, image)

  def test_black_patches(self):
    image = np.ones([10, 10, 3], np.float32)
    out = self.evaluate(preprocessor.random_black_patches(
        tf.constant(image), max_black_patches=1, probability=1.0,
        size_to_image_ratio=0.5, random_seed=1))
    self.assertEqual(int((out == 0).sum()), 5 * 5 * 3)
    zeros = np.argwhere(out[:, :, 0] == 0)
    self.assertEqual(zeros.max(axis=0).tolist(), (zeros.min(axis=0) + 4).tolist())
    none = self.evaluate(preprocessor.random_black_patches(
        tf.constant(image), probability=0.0))
    self.assertAllEqual(none, image)

  def test_subtract_channel_mean(self):
    out = self.evaluate(preprocessor.subtract_channel_mean(
        tf.fill([2, 2, 3], 10.0), means=[1.0, 2.0, 3.0]))
    self.assertAllClose(out[0, 0], [9.0, 8.0, 7.0])
    with self.assertRaisesRegex(ValueError, 'number of channels'):
      preprocessor.subtract_channel_mean(tf.zeros([2, 2, 3]), means=[1.0])
    with self.assertRaisesRegex(ValueError, 'height, width, channels'):
      preprocessor.subtract_channel_mean(tf.zeros([2, 3]), means=[1.0])


class ResizeTest(tf.test.TestCase):

  def test_resize_image_with_masks(self):
    image, masks, shape = self.evaluate(preprocessor.resize_image(
        tf.zeros([10, 20, 3]), tf.ones([2, 10, 20]), new_height=5, new_width=8))
    self.assertAllEqual(image.shape, [5, 8, 3])
    self.assertAllEqual(masks.shape, [2, 5, 8])
    self.assertAllEqual(masks, np.ones([2, 5, 8]))
    self.assertAllEqual(shape, [5, 8, 3])

  def test_resize_image_without_instances(self):
    _, masks, _ = self.evaluate(preprocessor.resize_image(
        tf.zeros([10, 20, 3]), tf.zeros([0, 10, 20]), new_height=5, new_width=8))
    self.assertAllEqual(masks.shape, [0, 5, 8])

  def test_random_image_scale(self):
    image, masks = self.evaluate(preprocessor.random_image_scale(
        tf.zeros([10, 20, 3]), tf.zeros([1, 10, 20]), min_scale_ratio=0.5,
        max_scale_ratio=2.0, seed=2))
    self.assertEqual(image.shape[:2], masks.shape[1:])
    self.assertTrue(5 <= image.shape[0] <= 20)
    self.assertAlmostEqual(image.shape[1] / image.shape[0], 2.0, delta=0.25)

  def test_resize_to_range_and_min_dimension(self):
    image, shape = self.evaluate(preprocessor.resize_to_range(
        tf.zeros([10, 40, 3]), min_dimension=20, max_dimension=60))
    self.assertAllEqual(image.shape, [15, 60, 3])
    self.assertAllEqual(shape, [15, 60, 3])
    image, _ = self.evaluate(preprocessor.resize_to_min_dimension(
        tf.zeros([10, 40, 3]), min_dimension=20))
    self.assertAllEqual(image.shape, [20, 80, 3])

  def test_random_resize_method(self):
    image = self.evaluate(preprocessor.random_resize_method(
        tf.zeros([10, 20, 3]), target_size=[6.0, 7.0]))
    self.assertAllEqual(image.shape, [6, 7, 3])


class PreprocessTest(tf.test.TestCase):

  def _tensor_dict(self):
    image, masks = _box_image(BOXES[1:], 8, 8)
    return {
        F.image: tf.constant(image[None]),
        F.groundtruth_boxes: tf.constant(BOXES),
        F.groundtruth_classes: tf.constant([1, 2]),
        F.groundtruth_weights: tf.constant([0.5, 1.0]),
        F.groundtruth_instance_masks: tf.constant(np.concatenate([masks, masks])),
        F.groundtruth_keypoints: tf.constant(KEYPOINTS),
    }

  def test_flip_through_preprocess_moves_everything(self):
    arg_map = preprocessor.get_default_func_arg_map(include_instance_masks=True,
                                                    include_keypoints=True)
    options = [(preprocessor.random_horizontal_flip,
                {'keypoint_flip_permutation': (0, 1), 'probability': 1.0})]
    inputs = self._tensor_dict()
    out = self.evaluate(preprocessor.preprocess(inputs, options, arg_map))
    self.assertAllEqual(out[F.image].shape, [1, 8, 8, 3])
    self.assertAllClose(out[F.groundtruth_boxes][1], [0.25, 0.0, 0.75, 0.5])
    self.assertAllClose(_pixel_box(out[F.image][0, :, :, 0] == 1),
                        out[F.groundtruth_boxes][1])
    self.assertAllClose(out[F.groundtruth_keypoints][0], [[0.1, 0.8], [0.3, 0.6]])
    self.assertAllEqual(out[F.groundtruth_classes], [1, 2])
    # The input dict is not modified.
    self.assertEqual(len(inputs[F.image].shape), 4)
    self.assertEqual(inputs[F.groundtruth_boxes].op.type, 'Const')

  def test_image_must_be_rank_4(self):
    with self.assertRaisesRegex(ValueError, 'rank 4'):
      preprocessor.preprocess({F.image: tf.zeros([4, 4, 3])}, [])

  def test_unknown_function(self):
    def my_op(image):
      return image
    with self.assertRaisesRegex(ValueError, 'my_op does not exist in func_arg_map'):
      preprocessor.preprocess({F.image: tf.zeros([1, 4, 4, 3])}, [(my_op, {})])

  def test_missing_key_is_named(self):
    with self.assertRaisesRegex(ValueError,
                                'random_crop_image requires argument groundtruth_classes'):
      preprocessor.preprocess(
          {F.image: tf.zeros([1, 4, 4, 3]), F.groundtruth_boxes: tf.constant(BOXES)},
          [(preprocessor.random_crop_image, {})],
          preprocessor.get_default_func_arg_map(include_label_weights=False))

  def test_custom_func_arg_map(self):
    arg_map = {preprocessor.random_horizontal_flip: (F.image, F.groundtruth_boxes)}
    out = self.evaluate(preprocessor.preprocess(
        {F.image: tf.zeros([1, 4, 4, 3]), F.groundtruth_boxes: tf.constant(BOXES)},
        [(preprocessor.random_horizontal_flip, {'probability': 1.0})], arg_map))
    self.assertAllClose(out[F.groundtruth_boxes][0], [0.0, 0.25, 0.75, 1.0])

  def test_unsupported_fields_in_arg_map(self):
    with self.assertRaisesRegex(ValueError, 'dense_pose'):
      preprocessor.get_default_func_arg_map(include_dense_pose=True)

  def test_cache_repeats_the_same_augmentation(self):
    options = [(preprocessor.random_horizontal_flip, {}),
               (preprocessor.random_rotation90, {}),
               (preprocessor.random_distort_color, {}),
               (preprocessor.random_black_patches, {}),
               (preprocessor.random_jitter_boxes, {})]
    cache = PreprocessorCache()
    first = preprocessor.preprocess(self._tensor_dict(), options,
                                    preprocess_vars_cache=cache)
    second = preprocessor.preprocess(self._tensor_dict(), options,
                                     preprocess_vars_cache=cache)
    first, second = self.evaluate([first, second])
    for key in (F.image, F.groundtruth_boxes):
      self.assertAllEqual(first[key], second[key])

  def test_seeded_graphs_reproduce(self):
    options = [(preprocessor.random_horizontal_flip, {}),
               (preprocessor.random_adjust_brightness, {}),
               (preprocessor.random_jitter_boxes, {})]
    results = []
    for _ in range(2):
      with tf.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(11)
        out = preprocessor.preprocess(self._tensor_dict(), options)
        with tf.compat.v1.Session(graph=graph) as sess:
          results.append(sess.run(out))
    for key in (F.image, F.groundtruth_boxes):
      self.assertAllEqual(results[0][key], results[1][key])


if __name__ == '__main__':
  tf.test.main()
