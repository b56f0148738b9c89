"""From a padded batch back to per-image tensors: `unstack_batch` (OD's `model_lib`).

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
