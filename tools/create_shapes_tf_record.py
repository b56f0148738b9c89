r"""Writes the synthetic "shapes" detection dataset as sharded TFRecords.

Each image is a noisy background with 1 to `max_shapes` non-overlapping
coloured shapes; the class of a shape is its kind. Three kinds by default
(rectangle, ellipse, triangle), up to five (+ diamond, cross). Boxes are the
tight normalized extents of the drawn pixels, so a detector can learn them
exactly. The output is deterministic for a seed (each image has its own
random stream, so the sharding does not change the images) and is the
embedded default data of the demo and the tests.

Command line:

    python -m tools.create_shapes_tf_record --output_dir=/tmp/shapes \
        --num_train=512 --num_val=64 --height=128 --width=128 --num_shards=4

writes `/tmp/shapes/train.tfrecord-0000i-of-00004`,
`/tmp/shapes/val.tfrecord-00000-of-00001` and `/tmp/shapes/label_map.pbtxt`.

In Python (tests, the demo, benchmarks):

    from tools import create_shapes_tf_record as shapes
    info = shapes.create_shapes_dataset('/tmp/shapes', num_train=64, num_val=16)
    info['train_pattern'], info['val_pattern'], info['label_map_path']
"""


import numpy as np
from absl import app
from absl import flags

from core import label_map_util
from core import paths
from tools import dataset_util

SHAPE_NAMES = ('rectangle', 'ellipse', 'triangle', 'diamond', 'cross')
MAX_CLASSES = len(SHAPE_NAMES)


def _shape_mask(kind, height, width):
  """Returns a bool [height, width] mask of shape `kind` filling the window."""
  yy, xx = np.ogrid[0:height, 0:width]
  # Pixel-centre coordinates in [-1, 1].
  y = (yy + 0.5) / height * 2.0 - 1.0
  x = (xx + 0.5) / width * 2.0 - 1.0
  if kind == 'rectangle':
    return np.ones((height, width), bool)
  if kind == 'ellipse':
    return y * y + x * x <= 1.0
  if kind == 'triangle':
    # Apex at the top centre, base along the bottom edge.
    return np.abs(x) <= (y + 1.0) / 2.0 + 1.0 / width
  if kind == 'diamond':
    return np.abs(x) + np.abs(y) <= 1.0
  if kind == 'cross':
    return (np.abs(x) <= 0.3) | (np.abs(y) <= 0.3)
  raise ValueError('Unknown shape kind %r' % kind)


def _contrasting_colour(rng, background):
  """A random RGB colour far enough from `background` to be visible."""
  for _ in range(20):
    colour = rng.integers(0, 256, size=3)
    if np.abs(colour - background).sum() >= 150:
      return colour
  return 255 - background


def generate_example(rng, height, width, max_shapes=3, num_classes=3, with_masks=False):
  """Draws one image.

  Args:
    rng: a numpy Generator.
    height: image height in pixels.
    width: image width in pixels.
    max_shapes: at most this many shapes (at least 1).
    num_classes: kinds of shape to use (1..5).
    with_masks: also return each shape's instance mask.

  Returns:
    (image uint8 [H, W, 3], boxes float32 [N, 4] normalized ymin, xmin, ymax,
    xmax, classes int [N] in 1..num_classes), and with_masks a fourth entry,
    uint8 [N, H, W] masks (1 on the shape's pixels).
  """
  if not 1 <= num_classes <= MAX_CLASSES:
    raise ValueError('num_classes must be in 1..%d, got %d' % (MAX_CLASSES, num_classes))
  background = rng.integers(0, 256, size=3)
  noise = rng.normal(0.0, 12.0, size=(height, width, 3))
  image = np.clip(background + noise, 0, 255)
  num_shapes = int(rng.integers(1, max(1, max_shapes) + 1))
  placed = []  # [y0, x0, y1, x1) pixel windows
  boxes, classes, masks = [], [], []
  min_side = max(4, int(0.15 * min(height, width)))
  max_side = max(min_side + 1, int(0.5 * min(height, width)))
  for _ in range(num_shapes):
    for _attempt in range(30):
      h = int(rng.integers(min_side, max_side + 1))
      w = int(rng.integers(min_side, max_side + 1))
      y0 = int(rng.integers(0, height - h + 1))
      x0 = int(rng.integers(0, width - w + 1))
      if all(y0 >= b[2] or y0 + h <= b[0] or x0 >= b[3] or x0 + w <= b[1] for b in placed):
        break
    else:
      continue
    class_id = int(rng.integers(1, num_classes + 1))
    mask = _shape_mask(SHAPE_NAMES[class_id - 1], h, w)
    colour = _contrasting_colour(rng, background)
    window = image[y0:y0 + h, x0:x0 + w]
    window[mask] = np.clip(colour + rng.normal(0.0, 6.0, size=(int(mask.sum()), 3)), 0, 255)
    rows = np.nonzero(mask.any(axis=1))[0]
    cols = np.nonzero(mask.any(axis=0))[0]
    placed.append((y0, x0, y0 + h, x0 + w))
    boxes.append([(y0 + rows[0]) / height, (x0 + cols[0]) / width,
                  (y0 + rows[-1] + 1) / height, (x0 + cols[-1] + 1) / width])
    classes.append(class_id)
    full_mask = np.zeros([height, width], np.uint8)
    full_mask[y0:y0 + h, x0:x0 + w] = mask
    masks.append(full_mask)
  example = (image.astype(np.uint8), np.asarray(boxes, np.float32).reshape([-1, 4]),
             np.asarray(classes, np.int64))
  if with_masks:
    return example + (np.asarray(masks, np.uint8).reshape([-1, height, width]),)
  return example


def _split_examples(split, split_id, count, seed, height, width, max_shapes, num_classes,
                    image_format, codec, instance_masks):
  """Yields the tf.Examples of one split."""
  extension = 'jpg' if image_format == 'jpeg' else 'png'
  for index in range(count):
    rng = np.random.default_rng([seed, split_id, index])
    image, boxes, classes, masks = generate_example(rng, height, width, max_shapes,
                                                    num_classes, with_masks=True)
    encoded = codec.encode(image, image_format)
    yield dataset_util.detection_example(
        encoded, image_format, height, width, boxes, classes,
        class_texts=[SHAPE_NAMES[c - 1] for c in classes],
        filename='%s_%06d.%s' % (split, index, extension),
        source_id='%s_%d' % (split, index),
        png_masks=[codec.encode_mask(m) for m in masks] if instance_masks else None)


def create_shapes_dataset(output_dir, num_train=256, num_val=32, height=128, width=128,
                          max_shapes=3, num_classes=3, num_shards=4, num_val_shards=1,
                          seed=0, image_format='jpeg', instance_masks=False):
  """Writes the shapes dataset and its label map.

  Args:
    output_dir: directory to write into (created if needed).
    num_train: images in the train split.
    num_val: images in the val split (0 = no val split).
    height: image height.
    width: image width.
    max_shapes: at most this many shapes per image.
    num_classes: 1..5 kinds of shape (class ids 1..num_classes).
    num_shards: train shards.
    num_val_shards: val shards.
    seed: the dataset is a function of the seed and the arguments above.
    image_format: 'jpeg' or 'png'.
    instance_masks: also write each shape's mask (PNG, `image/object/mask`),
      for Mask R-CNN (`load_instance_masks: true`, `mask_type: PNG_MASKS`).

  Returns:
    a dict with train_files, val_files, train_pattern, val_pattern,
    label_map_path, num_train, num_val, num_classes.
  """
  if not 1 <= num_classes <= MAX_CLASSES:
    raise ValueError('--num_classes must be in 1..%d, got %d' % (MAX_CLASSES, num_classes))
  if height < 16 or width < 16:
    raise ValueError('--height and --width must be >= 16, got %dx%d' % (height, width))
  if image_format not in ('jpeg', 'png'):
    raise ValueError("--image_format must be 'jpeg' or 'png', got %r" % image_format)
  paths.makedirs(output_dir)
  label_map_path = paths.join(output_dir, 'label_map.pbtxt')
  label_map_util.write_label_map(label_map_path, list(SHAPE_NAMES[:num_classes]))
  codec = dataset_util.ImageCodec()
  info = {'label_map_path': label_map_path, 'num_classes': num_classes}
  try:
    for split_id, (split, count, shards) in enumerate(
        [('train', num_train, num_shards), ('val', num_val, num_val_shards)]):
      if count <= 0:
        info[split + '_files'], info[split + '_pattern'], info['num_' + split] = [], None, 0
        continue
      prefix = paths.join(output_dir, split + '.tfrecord')
      examples = _split_examples(split, split_id, count, seed, height, width, max_shapes,
                                 num_classes, image_format, codec, instance_masks)
      split_shards = max(1, min(shards, count))
      shard_paths, written = dataset_util.write_sharded(examples, prefix, split_shards)
      info[split + '_files'] = shard_paths
      info[split + '_pattern'] = prefix + '-*'
      info['num_' + split] = written
  finally:
    codec.close()
  return info


FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's absl flags (idempotent)."""
  if 'num_train' in FLAGS:
    return
  flags.DEFINE_string('output_dir', None, 'Directory for the TFRecords and label_map.pbtxt.')
  flags.DEFINE_integer('num_train', 512, 'Images in the train split.')
  flags.DEFINE_integer('num_val', 64, 'Images in the val split.')
  flags.DEFINE_integer('height', 128, 'Image height.')
  flags.DEFINE_integer('width', 128, 'Image width.')
  flags.DEFINE_integer('max_shapes', 3, 'At most this many shapes per image (>= 1).')
  flags.DEFINE_integer('num_classes', 3, 'Kinds of shape, 1..5.')
  flags.DEFINE_integer('num_shards', 4, 'Train shards.')
  flags.DEFINE_integer('num_val_shards', 1, 'Val shards.')
  flags.DEFINE_integer('seed', 0, 'Random seed; same seed, same files.')
  flags.DEFINE_enum('image_format', 'jpeg', ['jpeg', 'png'], 'Image encoding.')
  flags.DEFINE_boolean('instance_masks', False,
                       'Also write instance masks (PNG) for Mask R-CNN.')


def main(argv):
  del argv
  if not FLAGS.output_dir:
    raise app.UsageError('--output_dir is required.')
  info = create_shapes_dataset(
      FLAGS.output_dir, num_train=FLAGS.num_train, num_val=FLAGS.num_val, height=FLAGS.height,
      width=FLAGS.width, max_shapes=FLAGS.max_shapes, num_classes=FLAGS.num_classes,
      num_shards=FLAGS.num_shards, num_val_shards=FLAGS.num_val_shards, seed=FLAGS.seed,
      image_format=FLAGS.image_format, instance_masks=FLAGS.instance_masks)
  print('Wrote %d train and %d val images; label map %s' %
        (info['num_train'], info['num_val'], info['label_map_path']))


if __name__ == '__main__':
  define_flags()
  app.run(main)
