"""Tests for trainer.eval_images: labelled boxes, groundtruth colour, panel titles.

Text pixels are checked by colour and place, not against a stored picture:
the font's anti-aliasing may vary with the Pillow build, but a label box in
the class colour with dark text inside does not.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import eval_images

tf.compat.v1.disable_eager_execution()

_GREY = 120
_NAMES = {1: 'circle', 2: 'square', 3: 'triangle'}
# A box well below the top edge, so its label goes above it.
_BOX = [0.5, 0.25, 0.9, 0.75]


def _grey(height=96, width=96):
  return np.full([height, width, 3], _GREY, np.uint8)


def _label_area(canvas, box):
  """Rows between the image top and the box's top line, over the box's columns."""
  height, width = canvas.shape[:2]
  top, left = int(round(box[0] * (height - 1))), int(round(box[1] * (width - 1)))
  right = int(round(box[3] * (width - 1)))
  return canvas[:top - 1, left:right + 1]


def _count(area, colour):
  return int(np.all(area == np.asarray(colour, np.uint8), axis=-1).sum())


def test_label_text_names_the_class_and_the_score():
  assert eval_images.label_text(1, _NAMES, 0.874) == 'circle: 87%'
  assert eval_images.label_text(3, _NAMES) == 'triangle'
  assert eval_images.label_text(9, _NAMES, 0.5) == 'id 9: 50%'


def test_detection_label_is_a_filled_box_with_text_above_the_box():
  image = _grey()
  plain = eval_images.draw_boxes(image, [_BOX], [1], [0.9], thickness=1)
  labelled = eval_images.draw_boxes(image, [_BOX], [1], [0.9], thickness=1,
                                    category_names=_NAMES)
  colour = eval_images.class_colour(1)
  # The outline is the same; only the label area above the box differs.
  assert np.array_equal(plain[int(round(_BOX[0] * 95)):], labelled[int(round(_BOX[0] * 95)):])
  area = _label_area(labelled, _BOX)
  assert np.all(_label_area(plain, _BOX) == _GREY)
  filled = _count(area, colour)
  # Text: pixels inside the label box that are neither its fill nor the background.
  text = int((np.abs(area.astype(int) - colour).sum(axis=-1) > 60).sum()) - _count(area, _GREY)
  assert filled > 100, filled
  assert text > 20, text
  # The label box sits right above the box (its bottom row touches the outline).
  assert _count(area[-1:], colour) > 10


def test_label_of_a_box_at_the_top_edge_goes_inside_it():
  box = [0.0, 0.2, 0.6, 0.8]
  labelled = eval_images.draw_boxes(_grey(), [box], [2], [0.75], thickness=1,
                                    category_names=_NAMES)
  plain = eval_images.draw_boxes(_grey(), [box], [2], [0.75], thickness=1)
  inside = labelled[2:20, 21:75]
  assert _count(inside, eval_images.class_colour(2)) > 100
  assert not np.array_equal(inside, plain[2:20, 21:75])


def test_boxes_below_the_threshold_get_no_label():
  labelled = eval_images.draw_boxes(_grey(), [_BOX], [1], [0.2], min_score_thresh=0.5,
                                    category_names=_NAMES)
  assert np.all(labelled == _GREY)


def _panels(picture, image_side):
  """(detections, groundtruth) panels of a side-by-side picture, titles cut off."""
  body = picture[eval_images.title_height():]
  return body[:, :image_side], body[:, image_side + 2:]


def test_missed_object_is_visible_in_the_groundtruth_colour_only():
  found, missed = [0.5, 0.1, 0.9, 0.4], [0.5, 0.6, 0.9, 0.9]
  picture = eval_images.detections_and_groundtruth(
      _grey(), ([found], [1], [0.95]), ([found, missed], [1, 3]), _NAMES,
      min_score_thresh=0.5, min_side=96)
  side = 96
  assert picture.shape == (eval_images.title_height() + side, 2 * side + 2, 3)
  detections, groundtruth = _panels(picture, side)
  top, left = int(round(missed[0] * 95)), int(round(missed[1] * 95))
  right = int(round(missed[3] * 95))
  # Groundtruth panel: the missed object's top line in the groundtruth colour,
  # its name in a groundtruth-coloured label box above it.
  line = groundtruth[top, left:right + 1]
  assert _count(line[None], eval_images.GROUNDTRUTH_COLOUR) == right - left + 1
  label = _label_area(groundtruth, missed)
  assert _count(label, eval_images.GROUNDTRUTH_COLOUR) > 100
  light = int((label.min(axis=-1) > 180).sum())
  assert light > 10, light   # white text on black
  # Detections panel: nothing at that place, the found object in its class colour.
  assert np.all(detections[top - 1:, left - 2:right + 3] == _GREY)
  found_top, found_left = int(round(found[0] * 95)), int(round(found[1] * 95))
  np.testing.assert_array_equal(detections[found_top, found_left + 3],
                                eval_images.class_colour(1))


def test_panels_carry_their_titles():
  picture = eval_images.detections_and_groundtruth(
      _grey(), (np.zeros([0, 4]), [], []), (np.zeros([0, 4]), []), _NAMES, min_side=96)
  strip = picture[:eval_images.title_height()]
  left, right = strip[:, :96], strip[:, 98:]
  for title in (left, right):
    dark = int((title.max(axis=-1) < 100).sum())
    assert dark > 20, dark
  assert not np.array_equal(left, right)   # "Detections" and "Groundtruth"
  assert np.all(picture[eval_images.title_height():, :96] == _GREY)


def test_small_images_are_enlarged_for_drawing():
  picture = eval_images.detections_and_groundtruth(
      _grey(48, 64), (np.zeros([0, 4]), [], []), None, _NAMES)
  # 48 -> 192 (factor 4), detections only.
  assert picture.shape == (eval_images.title_height() + 192, 256, 3)


def test_groundtruth_colour_differs_from_every_class_colour():
  for class_id in range(20):
    assert not np.array_equal(eval_images.class_colour(class_id),
                              eval_images.GROUNDTRUTH_COLOUR)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
