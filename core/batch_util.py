"""Per-image tensors and padded batches: `unstack_batch` (OD's `model_lib`), `pad_images`.

Estimator input_fns batch the groundtruth padded to a fixed number of boxes, with the
true count in `num_groundtruth_boxes`. A model's `provide_groundtruth` wants one tensor
per image holding only its real boxes:

    from trainer import model_lib
    unbatched = model_lib.unstack_batch(labels, unpad_groundtruth_tensors=True)
    model.provide_groundtruth(unbatched['groundtruth_boxes'],
                              unbatched['groundtruth_classes'])
    # labels['groundtruth_boxes']: [2, 100, 4], num_groundtruth_boxes [2] = [3, 1]
    # -> unbatched['groundtruth_boxes']: [<[3, 4]>, <[1, 4]>]

Every tensor of the dict is unstacked along its first dimension (which must be static);
the fields padded per box (`PADDED_PER_BOX_FIELDS` present in the dict) are then cut to
each image's `num_groundtruth_boxes`. Other fields (images, shapes, keys, per-image
classes) are only unstacked.

The other way, `pad_images` makes one batch of preprocessed images of
different sizes (keep_aspect_ratio_resizer, batch_size > 1): each is padded at
the bottom and right to the largest height and width, and its normalized
groundtruth boxes are moved into the padded image's frame (the OD API's
input pipeline realigns its boxes the same way), while `true_image_shapes`
keeps each image's content size:

    images, true_shapes, boxes_list = batch_util.pad_images(
        [model.preprocess(image) for image in images], boxes_list)

`groundtruth_lists` is that realignment for a batch the input_fns of
trainer/inputs.py padded (the Estimator path's model_fn): boxes into the
batch's frame, each image's instance masks cut back to its content.
"""

import tensorflow as tf

from core import standard_fields as fields

_INPUT = fields.InputDataFields

# Groundtruth whose first dimension is the (padded) box count of the image.
PADDED_PER_BOX_FIELDS = frozenset([
    _INPUT.groundtruth_boxes,
    _INPUT.groundtruth_classes,
    _INPUT.groundtruth_instance_masks,
    _INPUT.groundtruth_keypoints,
    _INPUT.groundtruth_keypoint_visibilities,
    _INPUT.groundtruth_group_of,
    _INPUT.groundtruth_difficult,
    _INPUT.groundtruth_is_crowd,
    _INPUT.groundtruth_area,
    _INPUT.groundtruth_weights,
    # Fields of later OD versions a user's input_fn may provide.
    'groundtruth_instance_mask_weights',
    'groundtruth_keypoint_depths',
    'groundtruth_keypoint_depth_weights',
    'groundtruth_dp_num_points',
    'groundtruth_dp_part_ids',
    'groundtruth_dp_surface_coords',
    'groundtruth_track_ids',
])


def _unstack(key, tensor):
  if tensor.shape.rank is None or tensor.shape.rank == 0 or tensor.shape[0] is None:
    raise ValueError('unstack_batch needs a static batch size: %r has shape %s (build '
                     'the dataset with drop_remainder=True)' % (key, tensor.shape))
  return tf.unstack(tensor)


def _first_rows(tensor, count):
  """tensor[:count] along the first dimension, keeping the static shape of the rest."""
  result = tensor[:count]
  result.set_shape([None] + tensor.shape.as_list()[1:])
  return result


def unstack_batch(tensor_dict, unpad_groundtruth_tensors=True):
  """Splits a batched tensor dict into per-image lists, optionally unpadded.

  Args:
    tensor_dict: dict {field: tensor [batch, ...]} with a static batch size, e.g. the
      labels (or features) an OD input_fn yields.
    unpad_groundtruth_tensors: cut each per-box groundtruth field to the image's
      `num_groundtruth_boxes` (which the dict must then hold).

  Returns:
    dict {field: [tensor per image]}, every key of `tensor_dict`.

  Raises:
    ValueError: `num_groundtruth_boxes` missing when unpadding (naming the keys
      there are), or a tensor without a static first dimension.
  """
  unbatched = {key: _unstack(key, tensor) for key, tensor in tensor_dict.items()}
  if not unpad_groundtruth_tensors:
    return unbatched
  if _INPUT.num_groundtruth_boxes not in unbatched:
    raise ValueError('`num_groundtruth_boxes` not found in tensor_dict. Keys available: '
                     '{}'.format(sorted(unbatched)))
  counts = unbatched[_INPUT.num_groundtruth_boxes]
  for key in PADDED_PER_BOX_FIELDS & set(unbatched):
    unbatched[key] = [_first_rows(padded, count)
                      for padded, count in zip(unbatched[key], counts)]
  return unbatched


def to_padded_frame(boxes, true_image_shape, padded_height, padded_width):
  """Normalized boxes of an image's content -> normalized to the padded image.

  Args:
    boxes: float [N, 4] normalized to the content ([0, 1] spans true_image_shape).
    true_image_shape: int32 [3], the content's height, width, channels.
    padded_height: the padded image's height (int or scalar tensor).
    padded_width: the padded image's width.

  Returns:
    float [N, 4], the same boxes relative to the padded image.
  """
  scale_y = tf.cast(true_image_shape[0], boxes.dtype) / tf.cast(padded_height, boxes.dtype)
  scale_x = tf.cast(true_image_shape[1], boxes.dtype) / tf.cast(padded_width, boxes.dtype)
  return boxes * tf.stack([scale_y, scale_x, scale_y, scale_x])


def pad_images(preprocessed, boxes_list):
  """One batch from per-image (image [1, h, w, C], true_image_shapes [1, 3]) pairs.

  Images of one static size are concatenated as they are (keeping the static
  shape a fixed-size model needs); others are padded with zeros at the
  bottom and right to the largest height and width. Either way each image's
  boxes are moved from its content's frame into its (padded) image's frame,
  which changes nothing where the content fills the image.

  Args:
    preprocessed: list of (image [1, h_i, w_i, C], true_image_shapes [1, 3])
      as `DetectionModel.preprocess` returns them.
    boxes_list: list of float [N_i, 4] boxes normalized to each content.

  Returns:
    (images [B, H, W, C], true_image_shapes int32 [B, 3], boxes list).
  """
  images = [image for image, _ in preprocessed]
  true_shapes = tf.concat([shape for _, shape in preprocessed], 0)
  static = [image.shape[1:3] for image in images]
  if all(shape.is_fully_defined() for shape in static) and len(
      set(tuple(shape.as_list()) for shape in static)) == 1:
    height, width = static[0].as_list()
  else:
    sizes = tf.stack([tf.shape(image)[1:3] for image in images])
    height, width = tf.reduce_max(sizes[:, 0]), tf.reduce_max(sizes[:, 1])
    images = [tf.image.pad_to_bounding_box(image, 0, 0, height, width) for image in images]
  boxes_list = [to_padded_frame(boxes, true_shapes[i], height, width)
                for i, boxes in enumerate(boxes_list)]
  return tf.concat(images, 0), true_shapes, boxes_list


def groundtruth_lists(labels, images, true_image_shapes):
  """Per-image groundtruth for `provide_groundtruth` from a padded label batch.

  What trainer/inputs.py's input_fns give: boxes normalized to each image's
  content, instance masks at the content's size, images of different sizes
  padded at the bottom and right into one batch. The boxes move into the
  batch's frame, where the model places its anchors, and each image's masks
  are cut back to its content (the frame the model expects them in):

    model.provide_groundtruth(**batch_util.groundtruth_lists(
        labels, features['image'], features['true_image_shape']))

  Args:
    labels: dict with groundtruth_boxes [B, max_boxes, 4],
      groundtruth_classes [B, max_boxes, num_classes], num_groundtruth_boxes
      [B], optionally groundtruth_weights [B, max_boxes] and
      groundtruth_instance_masks [B, max_boxes, h, w].
    images: the batch, float [B, H, W, C].
    true_image_shapes: int32 [B, 3], each image's content size.

  Returns:
    dict of `provide_groundtruth` keyword arguments (groundtruth_boxes_list,
    groundtruth_classes_list, and weights and masks when `labels` has them).

  Raises:
    ValueError: if the batch size is not static (input_fns drop remainders).
  """
  boxes = labels[_INPUT.groundtruth_boxes]
  batch_size = boxes.shape[0]
  if batch_size is None:
    raise ValueError('groundtruth_lists needs a static batch size in the labels (build the '
                     'dataset with drop_remainder=True); got groundtruth_boxes of shape %s'
                     % boxes.shape)
  num_boxes = tf.unstack(labels[_INPUT.num_groundtruth_boxes], num=batch_size)
  shapes = tf.unstack(true_image_shapes, num=batch_size)
  height, width = tf.shape(images)[1], tf.shape(images)[2]

  def unpad(key):
    return [t[:n] for t, n in zip(tf.unstack(labels[key], num=batch_size), num_boxes)]

  groundtruth = {
      'groundtruth_boxes_list': [to_padded_frame(b, shape, height, width)
                                 for b, shape in zip(unpad(_INPUT.groundtruth_boxes), shapes)],
      'groundtruth_classes_list': unpad(_INPUT.groundtruth_classes),
  }
  if _INPUT.groundtruth_weights in labels:
    groundtruth['groundtruth_weights_list'] = unpad(_INPUT.groundtruth_weights)
  if _INPUT.groundtruth_instance_masks in labels:
    groundtruth['groundtruth_masks_list'] = [
        masks[:, :shape[0], :shape[1]]
        for masks, shape in zip(unpad(_INPUT.groundtruth_instance_masks), shapes)]
  return groundtruth
