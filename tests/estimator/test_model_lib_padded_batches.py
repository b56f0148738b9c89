"""model_lib's groundtruth for batches of images of different sizes, with instance masks.

A keep_aspect_ratio_resizer (the two-stage zoo configs') gives each image its
own size; trainer/inputs.py's input_fns pad a batch of them at the bottom and
right. The labels' boxes stay normalized to each image's content (the frame
of the model's detections and of the COCO metrics), its instance masks come
at the content's size, and `batch_util.groundtruth_lists` (model_lib's
model_fn) moves the boxes into the padded batch's frame and cuts each
image's masks back to its content.
Checked on the shapes data at two sizes (80x96 -> 64x77, 96x64 -> 96x64; the
batch is 96x77): every mask lies inside its box, in pixels of its image, and
each box covers the same pixels in both frames. Also: the training loss
summaries keep the losses' own names as tags.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import batch_util
from core import config_util
from core import standard_fields as fields
from tools import create_shapes_tf_record
from trainer import inputs
from trainer import model_lib

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INPUT = fields.InputDataFields
# Each shape's mask pixels lie inside its box; nearest-neighbour resizing may
# move an edge by a pixel.
_TOLERANCE_PIXELS = 1.5


@pytest.fixture(scope='module')
def configs(tmp_path_factory):
  """The Mask R-CNN zoo config at 64..96 over one image of each of two sizes."""
  directory = str(tmp_path_factory.mktemp('padded_batches'))
  patterns = []
  for index, (height, width) in enumerate([(80, 96), (96, 64)]):
    data = create_shapes_tf_record.create_shapes_dataset(
        os.path.join(directory, str(index)), num_train=1, num_val=0, height=height,
        width=width, num_shards=1, seed=index + 3, instance_masks=True)
    patterns.append(data['train_pattern'])
  result = config_util.get_configs_from_pipeline_file(
      os.path.join(REPO_ROOT, 'configs', 'zoo', 'mask_rcnn_inception_v2_coco.config'))
  resizer = result['model'].faster_rcnn.image_resizer.keep_aspect_ratio_resizer
  resizer.min_dimension, resizer.max_dimension = 64, 96
  for reader in (result['train_input_config'], result['eval_input_config']):
    del reader.tf_record_input_reader.input_path[:]
    reader.tf_record_input_reader.input_path.extend(patterns)
    reader.label_map_path = data['label_map_path']
  # Unshuffled, each training batch holds both images.
  result['train_input_config'].shuffle = False
  result['train_config'].batch_size = 2
  result['eval_config'].batch_size = 2
  return result


def _batches(input_fn, count):
  """`count` (features, labels, groundtruth) of input_fn, run in a fresh graph."""
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(input_fn()).get_next()
    groundtruth = batch_util.groundtruth_lists(labels, features[_INPUT.image],
                                               features[_INPUT.true_image_shape])
    with tf.compat.v1.Session() as sess:
      return [sess.run((features, labels, groundtruth)) for _ in range(count)]


def _mask_extent(mask):
  """[ymin, xmin, ymax, xmax] pixel extent of a 0/1 mask's pixels."""
  rows, cols = np.nonzero(mask)
  return np.array([rows.min(), cols.min(), rows.max() + 1, cols.max() + 1], np.float32)


def _check_batch(features, labels, groundtruth):
  """Boxes and masks of each image of the batch are where its content is."""
  height, width = features[_INPUT.image].shape[1:3]
  true_shapes = features[_INPUT.true_image_shape]
  assert (height, width) == tuple(true_shapes[:, :2].max(axis=0))
  for i, (h, w, _) in enumerate(true_shapes):
    num = labels[_INPUT.num_groundtruth_boxes][i]
    assert num > 0
    content_boxes = labels[_INPUT.groundtruth_boxes][i, :num]
    batch_boxes = groundtruth['groundtruth_boxes_list'][i]
    np.testing.assert_allclose(batch_boxes * [height, width, height, width],
                               content_boxes * [h, w, h, w], atol=1e-4)
    masks = groundtruth['groundtruth_masks_list'][i]
    assert masks.shape == (num, h, w)
    for mask, box in zip(masks, content_boxes):
      np.testing.assert_allclose(_mask_extent(mask), box * [h, w, h, w],
                                 atol=_TOLERANCE_PIXELS)


def test_eval_batch_of_two_sizes_aligns_boxes_and_masks(configs):
  input_fn = inputs.create_eval_input_fn(configs['eval_config'], configs['eval_input_config'],
                                         configs['model'])
  (batch,) = _batches(input_fn, 1)
  features = batch[0]
  assert sorted(map(tuple, features[_INPUT.true_image_shape][:, :2])) == [(64, 77), (96, 64)]
  assert features[_INPUT.image].shape == (2, 96, 77, 3)
  _check_batch(*batch)


def test_flipped_training_masks_follow_their_boxes(configs):
  # The zoo config's random_horizontal_flip must flip the masks with the boxes.
  assert configs['train_config'].data_augmentation_options
  input_fn = inputs.create_train_input_fn(configs['train_config'],
                                          configs['train_input_config'], configs['model'])
  batches = _batches(input_fn, 4)
  for batch in batches:
    _check_batch(*batch)
  assert all(len(set(map(tuple, features[_INPUT.true_image_shape]))) == 2
             for features, _, _ in batches)


def test_loss_summary_tag_is_the_loss_name():
  # The model names its loss op as the loss (Loss/RPNLoss/localization_loss),
  # which made summary.scalar's tag 'Loss/RPNLoss/localization_loss_1'.
  name = 'Loss/RPNLoss/localization_loss'
  with tf.Graph().as_default():
    with tf.compat.v1.name_scope('Loss/RPNLoss/'):
      loss = tf.multiply(2.0, 1.5, name='localization_loss')
    assert loss.op.name == name
    model_lib._loss_summary(name, loss)
    with tf.compat.v1.Session() as sess:
      summary = tf.compat.v1.Summary.FromString(
          sess.run(tf.compat.v1.summary.merge_all()))
  assert [(value.tag, value.simple_value) for value in summary.value] == [(name, 3.0)]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
