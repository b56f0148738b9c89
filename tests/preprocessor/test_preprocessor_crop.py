"""Tests of the crop and pad augmentations (core.preprocessor_crop / _ssd).

Known crop windows and pad placements are put into a PreprocessorCache, so
the expected boxes, labels, masks and keypoints are computed by hand. Random
(seeded) runs are checked for invariants: boxes stay aligned with the pixels
and masks they describe, and per-box tensors stay aligned with the boxes.
"""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()

from core import preprocessor  # noqa: E402
from core import standard_fields as fields  # noqa: E402
from core.preprocessor_cache import PreprocessorCache  # noqa: E402

F = fields.InputDataFields
NAN = float('nan')

# Image 20 x 40. The crop window below is rows 5..15, cols 10..30.
HEIGHT, WIDTH = 20, 40
WINDOW = (0.25, 0.25, 0.75, 0.75)
BOXES = np.array([
    [0.0, 0.0, 0.5, 0.5],     # 25% of its area inside the window
    [0.3, 0.3, 0.6, 0.6],     # fully inside
    [0.8, 0.8, 1.0, 1.0],     # completely outside
    [0.5, 0.6, 0.9, 0.7],     # 62.5% inside, sticks out at the bottom
], np.float32)
LABELS = np.array([1, 2, 3, 4], np.int32)
WEIGHTS = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
KEYPOINTS = np.array([[[0.1, 0.1]], [[0.3, 0.3]], [[0.9, 0.9]], [[0.55, 0.65]]],
                     np.float32)


def _image():
  return np.arange(HEIGHT * WIDTH * 3, dtype=np.float32).reshape(HEIGHT, WIDTH, 3)


def _masks(boxes, height, width):
  masks = np.zeros([len(boxes), height, width], np.float32)
  for i, (ymin, xmin, ymax, xmax) in enumerate(boxes):
    masks[i, int(round(ymin * height)):int(round(ymax * height)),
          int(round(xmin * width)):int(round(xmax * width))] = 1.0
  return masks


def _window_cache(begin, size, window):
  cache = PreprocessorCache()
  cache.update(PreprocessorCache.STRICT_CROP_IMAGE, '',
               (tf.constant(begin, tf.int32), tf.constant(size, tf.int32),
                tf.constant(window, tf.float32)))
  return cache


def _inputs():
  return (tf.constant(_image()), tf.constant(BOXES), tf.constant(LABELS),
          tf.constant(WEIGHTS))


class RandomCropImageTest(tf.test.TestCase):

  def _crop(self, **kwargs):
    cache = _window_cache([5, 10, 0], [10, 20, -1], WINDOW)
    image, boxes, labels, weights = _inputs()
    return self.evaluate(preprocessor.random_crop_image(
        image, boxes, labels, weights, masks=tf.constant(_masks(BOXES, HEIGHT, WIDTH)),
        keypoints=tf.constant(KEYPOINTS),
        keypoint_visibilities=tf.ones([4, 1], tf.bool),
        preprocess_vars_cache=cache, **kwargs))

  def test_known_window_drops_and_moves_boxes(self):
    image, boxes, labels, weights, masks, keypoints, vis = self._crop(overlap_thresh=0.3)
    self.assertAllEqual(image, _image()[5:15, 10:30])
    # Kept: box 1 (inside) and box 3 (clipped at the bottom).
    self.assertAllClose(boxes, [[0.1, 0.1, 0.7, 0.7], [0.5, 0.7, 1.0, 0.9]])
    self.assertAllEqual(labels, [2, 4])
    self.assertAllClose(weights, [0.2, 0.4])
    self.assertAllEqual(masks, _masks(BOXES, HEIGHT, WIDTH)[[1, 3], 5:15, 10:30])
    self.assertAllClose(keypoints, [[[0.1, 0.1]], [[0.6, 0.8]]])
    self.assertAllEqual(vis, [[True], [True]])

  def test_lower_overlap_thresh_keeps_partial_box(self):
    _, boxes, labels, weights, _, keypoints, vis = self._crop(overlap_thresh=0.2)
    self.assertAllEqual(labels, [1, 2, 4])
    self.assertAllClose(weights, [0.1, 0.2, 0.4])
    self.assertAllClose(boxes[0], [0.0, 0.0, 0.5, 0.5])
    # Keypoint of box 0 lies outside the crop: NaN and invisible.
    self.assertTrue(np.all(np.isnan(keypoints[0])))
    self.assertAllEqual(vis[:, 0], [False, True, True])

  def test_no_clipping(self):
    _, boxes, _, _, _, _, _ = self._crop(overlap_thresh=0.3, clip_boxes=False)
    self.assertAllClose(boxes, [[0.1, 0.1, 0.7, 0.7], [0.5, 0.7, 1.3, 0.9]])

  def test_random_coef_one_keeps_original(self):
    image, boxes, labels, weights, *_ = self._crop(random_coef=1.0)
    self.assertAllEqual(image, _image())
    self.assertAllClose(boxes, BOXES)
    self.assertAllEqual(labels, LABELS)
    self.assertAllClose(weights, WEIGHTS)

  def test_random_windows_keep_everything_aligned(self):
    # Boxes on the pixel grid; labels encode the box index.
    boxes = np.array([[0.1, 0.1, 0.6, 0.5], [0.4, 0.3, 0.9, 0.9],
                      [0.0, 0.75, 0.3, 1.0]], np.float32)
    masks = _masks(boxes, HEIGHT, WIDTH)
    image = tf.constant(_image())
    seen_drop = False
    outputs = self.evaluate([preprocessor.random_crop_image(
        image, tf.constant(boxes), tf.constant([0, 1, 2]),
        tf.constant([0.0, 10.0, 20.0]), masks=tf.constant(masks),
        min_object_covered=0.0, area_range=(0.1, 0.5), overlap_thresh=0.5,
        seed=seed) for seed in range(6)])
    for new_image, new_boxes, labels, weights, new_masks in outputs:
      self.assertAllClose(weights, labels * 10.0)
      self.assertEqual(new_masks.shape[1:], new_image.shape[:2])
      self.assertTrue(np.all((new_boxes >= 0.0) & (new_boxes <= 1.0)))
      seen_drop |= len(labels) < 3
      for box, mask in zip(new_boxes, new_masks):
        height, width = mask.shape
        rows = np.where(mask.any(axis=1))[0]
        cols = np.where(mask.any(axis=0))[0]
        pixel_box = [rows[0] / height, cols[0] / width, (rows[-1] + 1) / height,
                     (cols[-1] + 1) / width]
        self.assertAllClose(box, pixel_box, atol=1e-5)
    self.assertTrue(seen_drop)

  def test_seeded_crop_reproduces(self):
    results = []
    for _ in range(2):
      with tf.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(5)
        out = preprocessor.random_crop_image(*_inputs(), min_object_covered=0.0)
        with tf.compat.v1.Session(graph=graph) as sess:
          results.append(sess.run(out))
    for a, b in zip(*results):
      self.assertAllEqual(a, b)
    self.assertNotEqual(results[0][0].shape, (HEIGHT, WIDTH, 3))


class RandomPadImageTest(tf.test.TestCase):

  def test_known_placement(self):
    cache = PreprocessorCache()
    cache.update(PreprocessorCache.PAD_IMAGE, '',
                 tuple(tf.constant(v) for v in (40, 80, 10, 20)))
    image, boxes, masks, keypoints = self.evaluate(preprocessor.random_pad_image(
        tf.constant(_image()), tf.constant(BOXES[:2]),
        tf.constant(_masks(BOXES[:2], HEIGHT, WIDTH)), tf.constant(KEYPOINTS[:2]),
        pad_color=(-1.0, -2.0, -3.0), preprocess_vars_cache=cache))
    self.assertAllEqual(image.shape, [40, 80, 3])
    self.assertAllEqual(image[10:30, 20:60], _image())
    self.assertAllEqual(image[0, 0], [-1.0, -2.0, -3.0])
    self.assertAllEqual(image[39, 79], [-1.0, -2.0, -3.0])
    # Offset (10, 20) of a 40 x 80 canvas is (0.25, 0.25); sizes halve.
    self.assertAllClose(boxes, [[0.25, 0.25, 0.5, 0.5], [0.4, 0.4, 0.55, 0.55]])
    self.assertAllEqual(masks[:, 10:30, 20:60], _masks(BOXES[:2], HEIGHT, WIDTH))
    self.assertEqual(masks.sum(), _masks(BOXES[:2], HEIGHT, WIDTH).sum())
    self.assertAllClose(keypoints, [[[0.3, 0.3]], [[0.4, 0.4]]])

  def test_random_pad_moves_boxes_with_pixels(self):
    image = np.zeros([HEIGHT, WIDTH, 3], np.float32)
    image[4:12, 8:20] = 1.0  # box [0.2, 0.2, 0.6, 0.5]
    outputs = self.evaluate([preprocessor.random_pad_image(
        tf.constant(image), tf.constant([[0.2, 0.2, 0.6, 0.5]]),
        pad_color=(0.0, 0.0, 0.0), seed=seed) for seed in range(4)])
    for new_image, boxes in outputs:
      height, width = new_image.shape[:2]
      self.assertTrue(HEIGHT <= height < 2 * HEIGHT)
      self.assertTrue(WIDTH <= width < 2 * WIDTH)
      rows = np.where(new_image[:, :, 0].any(axis=1))[0]
      cols = np.where(new_image[:, :, 0].any(axis=0))[0]
      self.assertAllClose(boxes[0], [rows[0] / height, cols[0] / width,
                                     (rows[-1] + 1) / height, (cols[-1] + 1) / width])

  def test_default_pad_color_is_mean(self):
    image = np.ones([4, 4, 3], np.float32) * [1.0, 2.0, 3.0]
    new_image, _ = self.evaluate(preprocessor.random_pad_image(
        tf.constant(image, tf.float32), tf.zeros([0, 4]), min_image_size=(8, 8),
        max_image_size=(9, 9)))
    self.assertAllClose(new_image, np.ones([8, 8, 3]) * [1.0, 2.0, 3.0])

  def test_absolute_pad(self):
    new_image, _ = self.evaluate(preprocessor.random_absolute_pad_image(
        tf.zeros([10, 10, 3]), tf.zeros([0, 4]), max_height_padding=3,
        max_width_padding=1))
    self.assertTrue(10 <= new_image.shape[0] < 13)
    self.assertEqual(new_image.shape[1], 10)


class CropPadAndAspectRatioTest(tf.test.TestCase):

  def test_crop_pad_known_window_and_placement(self):
    cache = _window_cache([5, 10, 0], [10, 20, -1], WINDOW)
    cache.update(PreprocessorCache.PAD_IMAGE, '',
                 tuple(tf.constant(v) for v in (20, 40, 5, 10)))
    masks = _masks(BOXES, HEIGHT, WIDTH)
    image, boxes, labels, weights, new_masks, keypoints = self.evaluate(
        preprocessor.random_crop_pad_image(
            *_inputs(), masks=tf.constant(masks), keypoints=tf.constant(KEYPOINTS),
            preprocess_vars_cache=cache))
    # The crop is put back where it came from: boxes return to image frame.
    self.assertAllEqual(image.shape, [20, 40, 3])
    self.assertAllEqual(image[5:15, 10:30], _image()[5:15, 10:30])
    self.assertAllClose(boxes, [[0.3, 0.3, 0.6, 0.6], [0.5, 0.6, 0.75, 0.7]])
    self.assertAllEqual(labels, [2, 4])
    self.assertAllClose(weights, [0.2, 0.4])
    expected_masks = masks[[1, 3]].copy()
    expected_masks[:, 15:] = 0.0  # box 3 was cut at the crop's bottom edge
    self.assertAllEqual(new_masks, expected_masks)
    self.assertAllClose(keypoints, [[[0.3, 0.3]], [[0.55, 0.65]]])

  def test_crop_pad_sizes(self):
    image, boxes, labels, weights = self.evaluate(preprocessor.random_crop_pad_image(
        *_inputs(), min_padded_size_ratio=(1.5, 1.5), max_padded_size_ratio=(2.0, 2.0),
        seed=3))
    self.assertTrue(30 <= image.shape[0] < 40)
    self.assertTrue(60 <= image.shape[1] < 80)
    self.assertEqual(len(boxes), len(labels))
    self.assertEqual(len(weights), len(labels))

  def test_crop_to_aspect_ratio_known_offset(self):
    cache = PreprocessorCache()
    cache.update(PreprocessorCache.CROP_TO_ASPECT_RATIO, '',
                 (tf.constant(0), tf.constant(10)))
    boxes = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.1, 0.8, 0.3, 0.9]])
    image, new_boxes, labels, masks = self.evaluate(
        preprocessor.random_crop_to_aspect_ratio(
            tf.constant(_image()), boxes, tf.constant([1, 2]),
            masks=tf.zeros([2, HEIGHT, WIDTH]), aspect_ratio=1.0,
            preprocess_vars_cache=cache))
    self.assertAllEqual(image, _image()[:, 10:30])
    # Window [0, 0.25, 1, 0.75]: box 0 keeps half its area, box 1 is outside.
    self.assertAllClose(new_boxes, [[0.0, 0.0, 0.5, 0.5]])
    self.assertAllEqual(labels, [1])
    self.assertAllEqual(masks.shape, [1, 20, 20])

  def test_crop_to_aspect_ratio_random(self):
    image, _, _ = self.evaluate(preprocessor.random_crop_to_aspect_ratio(
        tf.constant(_image()), tf.constant(BOXES), tf.constant(LABELS),
        aspect_ratio=2.5, seed=1))
    self.assertAllEqual(image.shape, [16, 40, 3])
    with self.assertRaisesRegex(ValueError, '3D'):
      preprocessor.random_crop_to_aspect_ratio(
          tf.zeros([1, 4, 4, 3]), tf.constant(BOXES), tf.constant(LABELS))

  def test_pad_to_aspect_ratio(self):
    image, boxes = self.evaluate(preprocessor.random_pad_to_aspect_ratio(
        tf.zeros([HEIGHT, WIDTH, 3]), tf.constant([[0.0, 0.0, 1.0, 1.0]]),
        aspect_ratio=1.0, min_padded_size_ratio=(2.0, 1.0),
        max_padded_size_ratio=(2.0, 1.0)))
    self.assertAllEqual(image.shape, [40, 40, 3])
    self.assertAllClose(boxes, [[0.0, 0.0, 0.5, 1.0]])


class SSDRandomCropTest(tf.test.TestCase):

  def _ssd_cache(self, selected, step='ssd_crop',
                 selector_id=PreprocessorCache.SSD_CROP_SELECTOR_ID):
    cache = PreprocessorCache()
    windows = [([0, 0, 0], [HEIGHT, WIDTH, -1], (0.0, 0.0, 1.0, 1.0)),
               ([5, 10, 0], [10, 20, -1], WINDOW)]
    for i, (begin, size, window) in enumerate(windows):
      cache.update(PreprocessorCache.STRICT_CROP_IMAGE, '%s_%d' % (step, i),
                   (tf.constant(begin), tf.constant(size), tf.constant(window)))
    cache.update(selector_id, step, tf.constant(selected))
    return cache

  def _ssd(self, selected, **kwargs):
    params = dict(min_object_covered=(0.0, 0.0),
                  aspect_ratio_range=((0.5, 2.0), (0.5, 2.0)),
                  area_range=((0.1, 1.0), (0.1, 1.0)), overlap_thresh=(0.0, 0.2),
                  random_coef=(0.0, 0.0))
    params.update(kwargs)
    return self.evaluate(preprocessor.ssd_random_crop(
        *_inputs(), preprocess_vars_cache=self._ssd_cache(selected), **params))

  def test_selected_operation_window_and_threshold(self):
    image, boxes, labels, weights = self._ssd(1)
    self.assertAllEqual(image, _image()[5:15, 10:30])
    self.assertAllEqual(labels, [1, 2, 4])  # overlap_thresh 0.2 of op 1
    self.assertAllClose(weights, [0.1, 0.2, 0.4])
    self.assertAllClose(boxes[1], [0.1, 0.1, 0.7, 0.7])
    image, boxes, labels, _ = self._ssd(1, overlap_thresh=(0.0, 0.5))
    self.assertAllEqual(labels, [2, 4])

  def test_full_image_operation(self):
    image, boxes, labels, _ = self._ssd(0)
    self.assertAllEqual(image, _image())
    self.assertAllClose(boxes, BOXES)
    self.assertAllEqual(labels, LABELS)

  def test_selected_random_coef(self):
    image, boxes, _, _ = self._ssd(1, random_coef=(0.0, 1.0))
    self.assertAllEqual(image, _image())
    self.assertAllClose(boxes, BOXES)

  def test_mismatched_operation_lists(self):
    with self.assertRaisesRegex(ValueError, 'overlap_thresh'):
      preprocessor.ssd_random_crop(*_inputs(), min_object_covered=(0.0, 0.5),
                                   overlap_thresh=(0.1, 0.2, 0.3))

  def test_ssd_crop_pad_known(self):
    cache = self._ssd_cache(1, 'ssd_crop_pad', PreprocessorCache.SSD_CROP_PAD_SELECTOR_ID)
    cache.update(PreprocessorCache.PAD_IMAGE, '',
                 tuple(tf.constant(v) for v in (20, 40, 5, 10)))
    image, boxes, labels, _ = self.evaluate(preprocessor.ssd_random_crop_pad(
        *_inputs(), min_object_covered=(0.0, 0.0),
        aspect_ratio_range=((0.5, 2.0),) * 2, area_range=((0.1, 1.0),) * 2,
        overlap_thresh=(0.0, 0.3), random_coef=(0.0, 0.0),
        min_padded_size_ratio=((1.0, 1.0),) * 2, max_padded_size_ratio=((2.0, 2.0),) * 2,
        pad_color=((0.0, 0.0, 0.0), (-1.0, -1.0, -1.0)), preprocess_vars_cache=cache))
    self.assertAllEqual(image[0, 0], [-1.0, -1.0, -1.0])
    self.assertAllEqual(image[5:15, 10:30], _image()[5:15, 10:30])
    self.assertAllClose(boxes, [[0.3, 0.3, 0.6, 0.6], [0.5, 0.6, 0.75, 0.7]])
    self.assertAllEqual(labels, [2, 4])

  def test_ssd_variants_random(self):
    masks = tf.constant(_masks(BOXES, HEIGHT, WIDTH))
    fetches = []
    for seed in range(2):
      fetches.append((
          preprocessor.ssd_random_crop(
              *_inputs(), masks=masks, keypoints=tf.constant(KEYPOINTS), seed=seed),
          preprocessor.ssd_random_crop_pad(*_inputs(), seed=seed),
          preprocessor.ssd_random_crop_fixed_aspect_ratio(
              *_inputs(), masks=masks, aspect_ratio=1.0, seed=seed),
          preprocessor.ssd_random_crop_pad_fixed_aspect_ratio(
              *_inputs(), masks=masks, aspect_ratio=2.0, seed=seed)))
    for crop, crop_pad, fixed, pad_fixed in self.evaluate(fetches):
      self.assertEqual(crop[4].shape[1:], crop[0].shape[:2])
      self.assertEqual(len(set(len(t) for t in crop[1:])), 1)
      self.assertEqual(len(set(len(t) for t in crop_pad[1:])), 1)
      image, boxes, labels, weights, new_masks = fixed
      self.assertEqual(image.shape[0], image.shape[1])
      self.assertEqual(new_masks.shape[1:], image.shape[:2])
      image, boxes, labels, weights, new_masks = pad_fixed
      self.assertLessEqual(abs(image.shape[1] - 2 * image.shape[0]), 1)  # rounding
      self.assertEqual(new_masks.shape[1:], image.shape[:2])
      self.assertEqual(len(weights), len(labels))


class PreprocessCropTest(tf.test.TestCase):

  def _tensor_dict(self):
    return {
        F.image: tf.constant(_image()[None]),
        F.groundtruth_boxes: tf.constant(BOXES),
        F.groundtruth_classes: tf.constant(LABELS),
        F.groundtruth_weights: tf.constant(WEIGHTS),
        F.groundtruth_instance_masks: tf.constant(_masks(BOXES, HEIGHT, WIDTH)),
        F.groundtruth_keypoints: tf.constant(KEYPOINTS),
    }

  def test_known_crop_through_preprocess(self):
    arg_map = preprocessor.get_default_func_arg_map(include_instance_masks=True,
                                                    include_keypoints=True)
    cache = _window_cache([5, 10, 0], [10, 20, -1], WINDOW)
    out = self.evaluate(preprocessor.preprocess(
        self._tensor_dict(), [(preprocessor.random_crop_image, {})], arg_map,
        preprocess_vars_cache=cache))
    self.assertAllEqual(out[F.image].shape, [1, 10, 20, 3])
    self.assertAllEqual(out[F.groundtruth_classes], [2, 4])
    self.assertAllClose(out[F.groundtruth_weights], [0.2, 0.4])
    self.assertAllEqual(out[F.groundtruth_instance_masks].shape, [2, 10, 20])
    self.assertAllClose(out[F.groundtruth_keypoints], [[[0.1, 0.1]], [[0.6, 0.8]]])

  def test_pipeline_with_cache_repeats(self):
    options = [(preprocessor.random_horizontal_flip, {'keypoint_flip_permutation': [0]}),
               (preprocessor.random_crop_image, {'min_object_covered': 0.0}),
               (preprocessor.random_pad_image, {}),
               (preprocessor.random_crop_pad_image, {'min_object_covered': 0.5}),
               (preprocessor.ssd_random_crop_pad, {}),
               (preprocessor.ssd_random_crop, {}),
               (preprocessor.random_crop_to_aspect_ratio, {})]
    arg_map = preprocessor.get_default_func_arg_map(include_instance_masks=True,
                                                    include_keypoints=True)
    cache = PreprocessorCache()
    first = preprocessor.preprocess(self._tensor_dict(), options, arg_map,
                                    preprocess_vars_cache=cache)
    second = preprocessor.preprocess(self._tensor_dict(), options, arg_map,
                                     preprocess_vars_cache=cache)
    first, second = self.evaluate([first, second])
    for key in first:
      self.assertAllEqual(first[key], second[key])
    self.assertEqual(first[F.groundtruth_instance_masks].shape[1:],
                     first[F.image].shape[1:3])


if __name__ == '__main__':
  tf.test.main()
