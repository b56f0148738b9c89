"""Builds a box similarity function from a `RegionSimilarityCalculator` proto.

    iou_similarity             -> IoU (also when unset)
    ioa_similarity             -> intersection over the anchor's area
    thresholded_iou_similarity -> IoU where it reaches iou_threshold, else 0
    neg_sq_dist_similarity     -> minus the squared distance of the corners

The result is fn(groundtruth_boxes [N, 4], anchors [M, 4]) -> [N, M], what
core.target_assigner.TargetAssigner takes as `similarity_fn`.

    similarity_fn = region_similarity_calculator_builder.build(
        ssd_config.similarity_calculator)
"""

import tensorflow as tf

from core import box_list_ops
from protos import region_similarity_calculator_pb2


def _negative_squared_distance(boxes1, boxes2):
  difference = boxes1[:, None, :] - boxes2[None, :, :]
  return -tf.reduce_sum(tf.square(difference), axis=2)


def build(similarity_config, path='model.ssd.similarity_calculator'):
  """Returns fn(boxes1 [N, 4], boxes2 [M, 4]) -> [N, M].

  Raises:
    ValueError: on a config of another type or an unknown choice.
  """
  if not isinstance(similarity_config,
                    region_similarity_calculator_pb2.RegionSimilarityCalculator):
    raise ValueError('region_similarity_calculator_config not of type '
                     'region_similarity_calculator_pb2.RegionsSimilarityCalculator')
  kind = similarity_config.WhichOneof('region_similarity')
  if kind in (None, 'iou_similarity'):
    return box_list_ops.iou
  if kind == 'ioa_similarity':
    # Divides by the second list's areas (the anchors), as the OD API's IoA.
    return box_list_ops.ioa
  if kind == 'thresholded_iou_similarity':
    threshold = similarity_config.thresholded_iou_similarity.iou_threshold

    def thresholded(boxes1, boxes2):
      overlaps = box_list_ops.iou(boxes1, boxes2)
      return tf.where(overlaps >= threshold, overlaps, tf.zeros_like(overlaps))
    return thresholded
  if kind == 'neg_sq_dist_similarity':
    return _negative_squared_distance
  raise ValueError('%s: unknown similarity %s' % (path, kind))
