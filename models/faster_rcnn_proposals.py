"""Region proposals for the two-stage detectors: anchors, RPN decoding, sampling.

The region proposal network (RPN) scores every anchor of one grid as object
or background and regresses an offset for it. This module turns those raw
outputs into the boxes the second stage looks at:

    anchors (pixels) --prune/clip to the image--> normalized anchors [M, 4]
    box_encodings [B, M, 4], objectness [B, M, 2]
      --decode + softmax + NMS-->  proposals [B, P, 4] (normalized), num [B]
      --training: balanced sample against groundtruth--> [B, batch_size, 4]

Every box here is normalized to the preprocessed (possibly padded) image:
IoU, the Faster R-CNN box coding and NMS are unchanged by scaling the axes,
so the pixel coordinates the OD API works in are only needed where anchors
are generated and pruned.

    anchors, kept = image_anchors(generator, feature_map, images, training=True,
                                  clip_anchors_to_image=False)
    window = true_image_window(tf.shape(images), true_image_shapes)
    proposals = rpn_proposals(box_coder, nms_fn, 300, encodings, logits, anchors,
                              window)

Differs on purpose from the OD API: helpers take and return plain tensors
(no BoxList), and work in normalized coordinates (see above).
"""

import tensorflow as tf

from core import box_coder as box_coder_lib
from core import box_list_ops


def spatial_size(images):
  """(height, width) of a [B, H, W, C] tensor: Python ints where static."""
  dynamic = tf.shape(images)
  return [images.shape[axis] if images.shape[axis] is not None else dynamic[axis]
          for axis in (1, 2)]


def _as_float(value):
  return tf.cast(value, tf.float32)


def image_anchors(anchor_generator, feature_map, images, training, clip_anchors_to_image,
                  drop_empty_anchors=True):
  """Anchors of the RPN grid, fitted to the image and normalized.

  As in the Faster R-CNN paper, training drops anchors that cross the image
  border (or clips them, with clip_anchors_to_image) and inference clips them.

  Args:
    anchor_generator: GridAnchorGenerator (one grid, pixel anchors).
    feature_map: float [B, h, w, D] RPN feature map.
    images: float [B, H, W, C] preprocessed images (padding included).
    training: whether the model trains.
    clip_anchors_to_image: in training, clip instead of dropping.
    drop_empty_anchors: at inference, drop anchors clipped to nothing.

  Returns:
    (anchors [M', 4] normalized to the image, kept int32 [M'] indices into
    the generator's anchors, or None when every anchor is kept).
  """
  height, width = spatial_size(feature_map)
  anchors = anchor_generator.generate([(height, width)])
  if isinstance(anchors, (list, tuple)):
    anchors = tf.concat(list(anchors), axis=0)
  image_height, image_width = spatial_size(images)
  window = _as_float(tf.stack([0, 0, image_height, image_width]))
  kept = None
  if training and not clip_anchors_to_image:
    anchors, kept = box_list_ops.prune_outside_window(anchors, window)
  else:
    anchors = box_list_ops.clip_to_window(anchors, window)
    if not training and drop_empty_anchors:
      kept = tf.cast(tf.reshape(tf.where(box_list_ops.area(anchors) > 0.0), [-1]), tf.int32)
      anchors = tf.gather(anchors, kept)
  # Dividing (not multiplying by the reciprocal) keeps border anchors at 1.0.
  scale = _as_float(tf.stack([image_height, image_width, image_height, image_width]))
  return anchors / scale, kept


def pad_or_clip_rows(tensor, size):
  """Pads with zeros or truncates axis 1 of [B, N, ...] to exactly `size`."""
  current = tf.shape(tensor)[1]
  paddings = [[0, 0], [0, tf.maximum(size - current, 0)]]
  paddings += [[0, 0]] * (tensor.shape.ndims - 2)
  result = tf.pad(tensor, paddings)[:, :size]
  result.set_shape([tensor.shape[0], size] + tensor.shape[2:].as_list())
  return result


def valid_proposal_indicator(num_proposals, max_num_proposals):
  """bool [B, max_num_proposals]: which rows of padded proposals are real."""
  return tf.range(max_num_proposals)[None, :] < num_proposals[:, None]


def rpn_proposals(box_coder, nms_fn, max_proposals, box_encodings, objectness_logits,
                  anchors, clip_window):
  """Decodes RPN outputs and keeps the best non-overlapping boxes per image.

  Args:
    box_coder: the RPN's box coder.
    nms_fn: fn(boxes [B, M, 1, 4], scores [B, M, 1], clip_window=[B, 4]) ->
      (boxes, scores, classes, num), e.g. a bound
      core.post_processing.batch_multiclass_non_max_suppression.
    max_proposals: proposals per image after NMS (padded to this).
    box_encodings: float [B, M, 4].
    objectness_logits: float [B, M, 2] (column 0: background).
    anchors: float [M, 4] normalized anchors.
    clip_window: float [B, 4] normalized windows of the true image content.

  Returns:
    dict with proposal_boxes [B, max_proposals, 4] (normalized, zero padded),
    proposal_scores [B, max_proposals], num_proposals int32 [B],
    raw_boxes [B, M, 4] (decoded, before NMS) and objectness [B, M, 2]
    (softmax).
  """
  raw_boxes = box_coder_lib.batch_decode(box_coder, box_encodings, anchors)
  objectness = tf.nn.softmax(objectness_logits)
  boxes, scores, _, num = nms_fn(tf.expand_dims(raw_boxes, 2), objectness[:, :, 1:],
                                 clip_window=clip_window)
  return {
      'proposal_boxes': pad_or_clip_rows(boxes, max_proposals),
      'proposal_scores': pad_or_clip_rows(scores, max_proposals),
      'num_proposals': tf.minimum(tf.cast(num, tf.int32), max_proposals),
      'raw_boxes': raw_boxes,
      'objectness': objectness,
  }


def _sample_one_image(assigner, sampler, batch_size, background_label, boxes, scores,
                      num_valid, groundtruth_boxes, groundtruth_labels, groundtruth_weights):
  """Picks up to batch_size proposals of one image; see sample_proposals."""
  cls_targets, cls_weights, _, _, _ = assigner.assign(
      boxes, groundtruth_boxes, groundtruth_labels,
      unmatched_class_label=background_label, groundtruth_weights=groundtruth_weights)
  positive = tf.argmax(cls_targets, axis=1, output_type=tf.int32) > 0
  candidate = tf.logical_and(tf.range(tf.shape(boxes)[0]) < num_valid, cls_weights > 0.0)
  selected = sampler.subsample(candidate, batch_size, positive)
  indices = tf.reshape(tf.where(selected), [-1])[:batch_size]
  return tf.gather(boxes, indices), tf.gather(scores, indices), tf.size(indices)


def sample_proposals(assigner, sampler, batch_size, num_classes, proposal_boxes,
                     proposal_scores, num_proposals, groundtruth_boxes_list,
                     groundtruth_labels_list, groundtruth_weights_list):
  """Balanced sample of each image's proposals for training the box classifier.

  Candidates are real (unpadded) proposals that the detection target
  assigner does not ignore; the sampler picks positives (matched to an
  object) and negatives among them, in their original order.

  Args:
    assigner: the second stage TargetAssigner.
    sampler: BalancedPositiveNegativeSampler.
    batch_size: proposals kept per image (second_stage_batch_size).
    num_classes: classes without background.
    proposal_boxes: float [B, P, 4] normalized.
    proposal_scores: float [B, P].
    num_proposals: int32 [B].
    groundtruth_boxes_list: per image float [N_i, 4] normalized.
    groundtruth_labels_list: per image float [N_i, num_classes + 1] (column 0
      background).
    groundtruth_weights_list: per image float [N_i].

  Returns:
    (boxes [B, batch_size, 4], scores [B, batch_size], num int32 [B]),
    zero padded.
  """
  batch = len(groundtruth_boxes_list)
  background = tf.one_hot(0, num_classes + 1, dtype=tf.float32)
  samples = [_sample_one_image(assigner, sampler, batch_size, background, boxes, scores,
                               num, gt_boxes, gt_labels, gt_weights)
             for boxes, scores, num, gt_boxes, gt_labels, gt_weights in zip(
                 tf.unstack(proposal_boxes, num=batch), tf.unstack(proposal_scores, num=batch),
                 tf.unstack(num_proposals, num=batch), groundtruth_boxes_list,
                 groundtruth_labels_list, groundtruth_weights_list)]
  boxes = tf.stack([pad_or_clip_rows(b[None], batch_size)[0] for b, _, _ in samples])
  scores = tf.stack([pad_or_clip_rows(s[None], batch_size)[0] for _, s, _ in samples])
  return boxes, scores, tf.stack([n for _, _, n in samples])


def true_image_window(image_shape, true_image_shapes):
  """float [B, 4]: the unpadded content of each image, normalized to the padded one.

  Args:
    image_shape: int32 [4] shape of the preprocessed [B, H, W, C] batch.
    true_image_shapes: int32 [B, 3] (or None: the whole image).
  """
  if true_image_shapes is None:
    return tf.tile(tf.constant([[0.0, 0.0, 1.0, 1.0]]), [image_shape[0], 1])
  true_shapes = _as_float(true_image_shapes)
  zeros = tf.zeros_like(true_shapes[:, 0])
  return tf.stack([zeros, zeros, true_shapes[:, 0] / _as_float(image_shape[1]),
                   true_shapes[:, 1] / _as_float(image_shape[2])], axis=1)


def to_window_frame(boxes, window, clip=True):
  """Re-expresses [B, N, ..., 4] boxes relative to per-image [B, 4] windows.

  The window becomes [0, 0, 1, 1]; with `clip` the boxes are first clipped
  to it.
  """
  expand = [slice(None)] + [None] * (boxes.shape.ndims - 2) + [slice(None)]
  window = window[tuple(expand)]
  low = tf.concat([window[..., :2], window[..., :2]], axis=-1)
  high = tf.concat([window[..., 2:], window[..., 2:]], axis=-1)
  size = tf.maximum(high - low, 1e-8)
  if clip:
    boxes = tf.clip_by_value(boxes, low, high)
  return (boxes - low) / size


def from_window_frame(boxes, window):
  """Inverse of to_window_frame (without the clipping)."""
  expand = [slice(None)] + [None] * (boxes.shape.ndims - 2) + [slice(None)]
  window = window[tuple(expand)]
  low = tf.concat([window[..., :2], window[..., :2]], axis=-1)
  high = tf.concat([window[..., 2:], window[..., 2:]], axis=-1)
  return boxes * (high - low) + low
