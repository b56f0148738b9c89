r"""Boxes drawn on images, as PNG bytes and TensorBoard image summaries.

The evaluator and the demo show detections the same way, as the Object
Detection API's pictures do: two panels side by side under their titles,
"Detections" (each box in its class colour with a filled label box above it
saying `name: 87%`) and "Groundtruth" (every box in one colour of its own,
labelled with its class name). A missed object is then a labelled box on the
right with nothing at its place on the left. Boxes are painted in numpy;
text is drawn with Pillow's built-in font; PNGs are encoded with zlib, so no
session or graph op is needed:

    from trainer import eval_images
    names = {1: 'circle', 2: 'square'}          # label map id -> name
    pair = eval_images.detections_and_groundtruth(
        image_uint8, (boxes, classes, scores), (gt_boxes, gt_classes), names,
        min_score_thresh=0.5, max_boxes_to_draw=20)
    png_bytes = eval_images.encode_png(pair)
    summary_value = eval_images.image_summary_value('Detections_Left_Groundtruth_Right/0', pair)

The lower-level `draw_boxes` draws one panel, `side_by_side` joins panels.
Boxes are normalized `[ymin, xmin, ymax, xmax]`; class ids are the label map's.

Differs on purpose from the OD API's pictures: small images are enlarged
(nearest neighbour, by an integer factor) before drawing so that the labels
stay readable, and each box line has a thin contrasting edge so that it shows
on a background of its own colour.
"""

import functools
import struct
import zlib

import numpy as np
from PIL import Image
from PIL import ImageDraw
from PIL import ImageFont
import tensorflow as tf

from core import paths

# Distinct, saturated colours; class id i uses _PALETTE[i % len].
_PALETTE = np.array([
    [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
    [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 190],
], np.uint8)


# Groundtruth boxes and labels, whatever their class (as in the OD API).
GROUNDTRUTH_COLOUR = np.array([0, 0, 0], np.uint8)
# Panel titles, black on white.
DETECTIONS_TITLE = 'Detections'
GROUNDTRUTH_TITLE = 'Groundtruth'
# Images are enlarged by an integer factor to at least this side before drawing.
MIN_DRAWN_SIDE = 192
_WHITE = np.array([255, 255, 255], np.uint8)


def class_colour(class_id):
  """The RGB colour (uint8 [3]) boxes of `class_id` are drawn in."""
  return _PALETTE[int(class_id) % len(_PALETTE)]


def _contrast(colour):
  """Black or white, whichever reads better on `colour` (text, box edges)."""
  red, green, blue = (int(c) for c in colour)
  return (0, 0, 0) if 0.299 * red + 0.587 * green + 0.114 * blue >= 128 else (255, 255, 255)


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


def _pixel_box(canvas, box):
  """(top, left, bottom, right) pixel corners of a normalized yxyx box on canvas."""
  height, width = canvas.shape[:2]
  ymin, xmin, ymax, xmax = np.clip(box, 0.0, 1.0)
  return (int(round(ymin * (height - 1))), int(round(xmin * (width - 1))),
          int(round(ymax * (height - 1))), int(round(xmax * (width - 1))))


def _draw_rectangle(canvas, box, colour, thickness):
  """Draws one normalized yxyx box onto canvas in place.

  The coloured line has a one-pixel edge on both sides (black, or white for
  a dark colour), so that it stays visible on a background of its own colour.
  """
  top, left, bottom, right = _pixel_box(canvas, box)
  _outline(canvas, top - 1, left - 1, bottom + 1, right + 1, _contrast(colour), thickness + 2)
  _outline(canvas, top, left, bottom, right, colour, thickness)


@functools.lru_cache(maxsize=1)
def _font():
  """Pillow's built-in font (no font file needed on the machine)."""
  return ImageFont.load_default()


def _text_width(draw, text):
  left, _, right, _ = draw.textbbox((0, 0), text, font=_font())
  return right - left


@functools.lru_cache(maxsize=1)
def _line_metrics():
  """(height, top offset) of a line of text with ascenders and descenders.

  Every label and title uses them, so that all have the same height whatever
  their letters.
  """
  probe = ImageDraw.Draw(Image.new('RGB', (1, 1)))
  _, top, _, bottom = probe.textbbox((0, 0), 'Agy', font=_font())
  return bottom - top, top


def _draw_label(draw, canvas_shape, top, left, text, colour):
  """Writes `text` in a filled box of `colour` above pixel (top, left).

  Where there is no room above (a box at the image's top edge), the label
  goes just inside the box instead, as the OD API places it.
  """
  text_width = _text_width(draw, text)
  text_height, text_offset = _line_metrics()
  margin = 2
  label_height = text_height + 2 * margin
  label_top = top - label_height if top >= label_height else top
  label_left = min(max(left, 0), max(canvas_shape[1] - text_width - 2 * margin, 0))
  draw.rectangle([label_left, label_top, label_left + text_width + 2 * margin - 1,
                  label_top + label_height - 1], fill=tuple(int(c) for c in colour))
  draw.text((label_left + margin, label_top + margin - text_offset), text,
            fill=_contrast(colour), font=_font())


def label_text(class_id, category_names, score=None):
  """`name: 87%` for a detection, `name` for a groundtruth box.

  Args:
    class_id: the label map id.
    category_names: {id: name}; an id missing there is shown as `id N`.
    score: the detection score in [0, 1], or None.

  Returns:
    str.
  """
  name = category_names.get(int(class_id), 'id %d' % int(class_id))
  return name if score is None else '%s: %d%%' % (name, int(round(100 * float(score))))


def _chosen_boxes(num_boxes, scores, min_score_thresh, max_boxes_to_draw):
  """Indices of the boxes to draw: scoring at least the threshold, best first."""
  order = list(range(num_boxes))
  if scores is not None:
    order = [i for i in np.argsort(-scores, kind='stable') if scores[i] >= min_score_thresh]
  return order[:max_boxes_to_draw] if max_boxes_to_draw else order


def draw_boxes(image, boxes, classes, scores=None, min_score_thresh=0.0,
               max_boxes_to_draw=20, thickness=None, category_names=None, colour=None):
  """Returns a copy of `image` with boxes outlined, and labelled if names are given.

  Args:
    image: uint8 [H, W, 3] (or [H, W, 1], shown as grey).
    boxes: float [N, 4] normalized yxyx.
    classes: int [N] class ids.
    scores: optional float [N]; boxes scoring below min_score_thresh are
      skipped, the others are drawn best first.
    min_score_thresh: see scores.
    max_boxes_to_draw: at most this many boxes (None or 0: all).
    thickness: width in pixels of the coloured line (default: about
      the image side / 80), edged on both sides.
    category_names: optional {class id: name}. When given, each box gets a
      filled label box (see `label_text`): with the score when `scores` are
      given; the best box's label ends up on top.
    colour: RGB for every box and label (e.g. GROUNDTRUTH_COLOUR); default:
      each box in its class colour.

  Returns:
    uint8 [H, W, 3].
  """
  canvas = np.array(image, np.uint8, copy=True)
  if canvas.ndim == 3 and canvas.shape[2] == 1:
    canvas = np.repeat(canvas, 3, axis=2)
  boxes = np.asarray(boxes, np.float32).reshape([-1, 4])
  classes = np.asarray(classes).reshape([-1])
  if scores is not None:
    scores = np.asarray(scores, np.float32).reshape([-1])
  order = _chosen_boxes(len(boxes), scores, min_score_thresh, max_boxes_to_draw)
  if thickness is None:
    thickness = max(1, min(canvas.shape[:2]) // 80)
  colours = {i: class_colour(classes[i]) if colour is None else colour for i in order}
  for i in order:
    _draw_rectangle(canvas, boxes[i], colours[i], thickness)
  if category_names is None or not order:
    return canvas
  picture = Image.fromarray(canvas)
  draw = ImageDraw.Draw(picture)
  for i in reversed(order):
    top, left, _, _ = _pixel_box(canvas, boxes[i])
    text = label_text(classes[i], category_names, None if scores is None else scores[i])
    _draw_label(draw, canvas.shape, top - 1, left - 1, text, colours[i])
  return np.asarray(picture, np.uint8).copy()


def upscale(image, factor):
  """Nearest-neighbour enlargement of a [H, W, C] image by an integer factor."""
  return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1) if factor > 1 else image


def enlarge_to(image, min_side=MIN_DRAWN_SIDE):
  """`image` enlarged by the smallest integer factor that gives it `min_side` or more."""
  return upscale(image, max(1, -(-min_side // max(1, min(image.shape[:2])))))


def title_height():
  """Height in pixels of the strip `with_title` adds (the same for every title)."""
  return _line_metrics()[0] + 6


def with_title(image, title):
  """`image` (uint8 [H, W, 3]) under a white strip with `title` in black, centred."""
  width = image.shape[1]
  strip = Image.new('RGB', (width, title_height()), tuple(int(c) for c in _WHITE))
  draw = ImageDraw.Draw(strip)
  left = max((width - _text_width(draw, title)) // 2, 0)
  draw.text((left, 3 - _line_metrics()[1]), title, fill=(0, 0, 0), font=_font())
  return np.concatenate([np.asarray(strip, np.uint8), image], axis=0)


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


def detections_and_groundtruth(image, detections, groundtruth, category_names,
                               min_score_thresh=0.0, max_boxes_to_draw=20,
                               min_side=MIN_DRAWN_SIDE):
  """The picture the evaluator and the demo show for one image.

  Args:
    image: uint8 [H, W, 3].
    detections: (boxes [N, 4] normalized yxyx, classes [N] label map ids,
      scores [N]).
    groundtruth: (boxes [M, 4], classes [M]), or None to show detections only.
    category_names: {label map id: name}.
    min_score_thresh: detections scoring less are not drawn.
    max_boxes_to_draw: at most this many detections (None or 0: all); every
      groundtruth box is drawn.
    min_side: the image is enlarged to at least this side before drawing.

  Returns:
    uint8 [H', W', 3]: "Detections" and, if given, "Groundtruth" panels,
    each under its title, side by side.
  """
  image = enlarge_to(image, min_side)
  boxes, classes, scores = detections
  panels = [with_title(draw_boxes(
      image, boxes, classes, scores, min_score_thresh=min_score_thresh,
      max_boxes_to_draw=max_boxes_to_draw, category_names=category_names), DETECTIONS_TITLE)]
  if groundtruth is not None:
    panels.append(with_title(draw_boxes(
        image, groundtruth[0], groundtruth[1], max_boxes_to_draw=0,
        category_names=category_names, colour=GROUNDTRUTH_COLOUR), GROUNDTRUTH_TITLE))
  return side_by_side(panels)


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
  paths.write_file_atomically(path, encode_png(image))
