r"""Boxes drawn on images, as PNG bytes and TensorBoard image summaries.

The evaluator and the demo show detections the same way: predicted boxes on
the left copy of an image, groundtruth on the right, one colour per class.
Drawing happens in numpy and PNGs are encoded with zlib, so no session, no
graph op and no imaging library is needed (slimtrain does not depend on PIL):

    from trainer import eval_images
    panel = eval_images.draw_boxes(image_uint8, boxes, classes, scores,
                                   min_score_thresh=0.5, max_boxes_to_draw=20)
    pair = eval_images.side_by_side([panel, eval_images.draw_boxes(image_uint8, gt, gt_cls)])
    png_bytes = eval_images.encode_png(pair)
    summary_value = eval_images.image_summary_value('Detections_Left_Groundtruth_Right/0', pair)

Boxes are normalized `[ymin, xmin, ymax, xmax]`; class ids are the label map's.
"""

import struct
import zlib

import numpy as np
import tensorflow as tf

# Distinct, saturated colours; class id i uses _PALETTE[i % len].
_PALETTE = np.array([
    [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
    [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 190],
], np.uint8)


def class_colour(class_id):
  """The RGB colour (uint8 [3]) boxes of `class_id` are drawn in."""
  return _PALETTE[int(class_id) % len(_PALETTE)]


def _outline(canvas, top, left, bottom, right, colour, thickness):
  """Paints a rectangle outline (pixel corners inclusive, clipped) in place."""
  height, width = canvas.shape[:2]
  top, left = max(top, 0), max(left, 0)
  bottom, right = min(bottom, height - 1), min(right, width - 1)
  if top > bottom or left > right:
    return
  t = thickness
  canvas[top:min(top + t, bottom + 1), left:right + 1] = colour
  canvas[max(bottom - t + 1, top):bottom + 1, left:right + 1] = colour
  canvas[top:bottom + 1, left:min(left + t, right + 1)] = colour
  canvas[top:bottom + 1, max(right - t + 1, left):right + 1] = colour


def _draw_rectangle(canvas, box, colour, thickness):
  """Draws one normalized yxyx box onto canvas in place.

  The coloured line has a one-pixel black edge on both sides, so that it
  stays visible on a background (or shape) of its own colour.
  """
  height, width = canvas.shape[:2]
  ymin, xmin, ymax, xmax = np.clip(box, 0.0, 1.0)
  top, bottom = int(round(ymin * (height - 1))), int(round(ymax * (height - 1)))
  left, right = int(round(xmin * (width - 1))), int(round(xmax * (width - 1)))
  _outline(canvas, top - 1, left - 1, bottom + 1, right + 1, (0, 0, 0), thickness + 2)
  _outline(canvas, top, left, bottom, right, colour, thickness)


def upscale(image, factor):
  """Nearest-neighbour enlargement of a [H, W, C] image by an integer factor."""
  return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1) if factor > 1 else image


def draw_boxes(image, boxes, classes, scores=None, min_score_thresh=0.0,
               max_boxes_to_draw=20, thickness=None):
  """Returns a copy of `image` with boxes outlined in their class colour.

  Args:
    image: uint8 [H, W, 3] (or [H, W, 1], shown as grey).
    boxes: float [N, 4] normalized yxyx.
    classes: int [N] class ids.
    scores: optional float [N]; boxes scoring below min_score_thresh are
      skipped, the others are drawn best first.
    min_score_thresh: see scores.
    max_boxes_to_draw: at most this many boxes (None or 0: all).
    thickness: width in pixels of the coloured line (default: about
      the image side / 80), edged with black on both sides.

  Returns:
    uint8 [H, W, 3].
  """
  canvas = np.array(image, np.uint8, copy=True)
  if canvas.ndim == 3 and canvas.shape[2] == 1:
    canvas = np.repeat(canvas, 3, axis=2)
  boxes = np.asarray(boxes, np.float32).reshape([-1, 4])
  classes = np.asarray(classes).reshape([-1])
  order = np.arange(len(boxes))
  if scores is not None:
    scores = np.asarray(scores, np.float32).reshape([-1])
    order = [i for i in np.argsort(-scores, kind='stable') if scores[i] >= min_score_thresh]
  if max_boxes_to_draw:
    order = order[:max_boxes_to_draw]
  if thickness is None:
    thickness = max(1, min(canvas.shape[:2]) // 80)
  for i in order:
    _draw_rectangle(canvas, boxes[i], class_colour(classes[i]), thickness)
  return canvas


def side_by_side(images, gap=2):
  """Concatenates uint8 [H, W, 3] images left to right, white gaps between.

  Images of different heights are padded at the bottom with white.
  """
  height = max(image.shape[0] for image in images)
  columns = []
  for i, image in enumerate(images):
    if i:
      columns.append(np.full([height, gap, 3], 255, np.uint8))
    pad = height - image.shape[0]
    columns.append(np.pad(image, [[0, pad], [0, 0], [0, 0]], constant_values=255))
  return np.concatenate(columns, axis=1)


def _png_chunk(kind, data):
  return (struct.pack('>I', len(data)) + kind + data +
          struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff))


def encode_png(image):
  """Encodes a uint8 [H, W, 3] RGB image as PNG bytes.

  Raises:
    ValueError: if image is not uint8 [H, W, 3].
  """
  image = np.asarray(image)
  if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
    raise ValueError('encode_png expects uint8 [H, W, 3], got %s %s' %
                     (image.dtype, image.shape))
  height, width = image.shape[:2]
  # Each row starts with filter type 0 (no filter).
  rows = np.concatenate([np.zeros([height, 1], np.uint8), image.reshape([height, -1])], axis=1)
  header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)
  return (b'\x89PNG\r\n\x1a\n' + _png_chunk(b'IHDR', header) +
          _png_chunk(b'IDAT', zlib.compress(rows.tobytes(), 6)) + _png_chunk(b'IEND', b''))


def image_summary_value(tag, image):
  """A `Summary.Value` holding `image` (uint8 [H, W, 3]) as a PNG."""
  return tf.compat.v1.Summary.Value(tag=tag, image=tf.compat.v1.Summary.Image(
      height=image.shape[0], width=image.shape[1], colorspace=3,
      encoded_image_string=encode_png(image)))


def write_png(path, image):
  """Writes `image` (uint8 [H, W, 3]) to `path` as a PNG, atomically."""
  temp_path = '%s.tmp%d' % (path, np.random.randint(1 << 30))
  with tf.io.gfile.GFile(temp_path, 'wb') as f:
    f.write(encode_png(image))
  tf.io.gfile.rename(temp_path, path, overwrite=True)
