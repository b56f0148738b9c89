"""Second-stage detections of the two-stage detectors.

The box classifier predicts, for each of P proposals per image, K+1 class
logits and one box encoding per class (or one shared by all). Turning them
into detections:

    refined [B*P, q, 4] --decode against the proposals--> boxes [B, P, q, 4]
    logits [B*P, K+1] --score conversion--> scores [B, P, K+1]
    (padded proposals scored below any threshold)
      --batch NMS, clipped to the true image and relative to it-->
        detection_boxes [B, N, 4], scores, classes (0-based), num_detections
    mask logits [B*P, q, h, w] of each detection's proposal and class
      --sigmoid--> detection_masks [B, N, h, w]

    detections = box_classifier_detections(coder, nms_fn, tf.nn.softmax,
        refined, logits, proposals, num_proposals, window)

Batch NMS (tf.image.combined_non_max_suppression) does not say which input
row a detection came from; `detection_source_indices` recovers it from the
detection's score and box (the OD API's NMS returns it).
"""

import tensorflow as tf

from core import standard_fields as fields
from models import faster_rcnn_proposals as proposals_lib

DETECTION_ANCHOR_INDICES = 'detection_anchor_indices'

# Score given to padded proposals so that no NMS score threshold keeps them.
_PADDING_SCORE = -1.0


def masked_scores(scores, num_proposals):
  """[B, P, K] scores with padded proposals set below any NMS threshold."""
  valid = proposals_lib.valid_proposal_indicator(num_proposals, tf.shape(scores)[1])
  return tf.where(tf.tile(valid[:, :, None], [1, 1, tf.shape(scores)[2]]), scores,
                  _PADDING_SCORE * tf.ones_like(scores))


def detection_source_indices(detection_boxes, detection_scores, detection_classes,
                             candidate_boxes, candidate_scores):
  """Which candidate row each NMS detection came from.

  Batch NMS (tf.image.combined_non_max_suppression) returns boxes and scores
  but not their indices; a detection of class c is the candidate whose score
  and class-c box it reproduces, so the closest one is picked.

  Args:
    detection_boxes: float [B, D, 4].
    detection_scores: float [B, D].
    detection_classes: float [B, D] 0-based classes.
    candidate_boxes: float [B, P, q, 4] boxes as NMS saw them (q = 1 or K).
    candidate_scores: float [B, P, K] scores as NMS saw them.

  Returns:
    int32 [B, D] indices into P.
  """
  classes = tf.cast(detection_classes, tf.int32)
  per_class_scores = tf.gather(tf.transpose(candidate_scores, [0, 2, 1]), classes,
                               axis=1, batch_dims=1)                       # [B, D, P]
  if candidate_boxes.shape[2] == 1:
    per_class_boxes = tf.tile(tf.transpose(candidate_boxes, [0, 2, 1, 3]),
                              [1, tf.shape(classes)[1], 1, 1])             # [B, D, P, 4]
  else:
    per_class_boxes = tf.gather(tf.transpose(candidate_boxes, [0, 2, 1, 3]), classes,
                                axis=1, batch_dims=1)
  distance = (tf.abs(per_class_scores - detection_scores[:, :, None]) +
              tf.reduce_sum(tf.abs(per_class_boxes - detection_boxes[:, :, None, :]),
                            axis=-1))
  return tf.argmin(distance, axis=2, output_type=tf.int32)


def single_prediction(value):
  """A box predictor output for one feature map -> tensor without its axis 1.

  Predictors return [tensor [N, 1, ...]] (one entry per feature map, one
  prediction per location); the meta-architectures want [N, ...].
  """
  if isinstance(value, (list, tuple)):
    value = value[0] if len(value) == 1 else tf.concat(list(value), axis=1)
  return tf.squeeze(value, axis=1)


def to_pixels(boxes, image_shape):
  """[B, P, 4] normalized boxes -> pixels of the [B, H, W, C] `image_shape`."""
  scale = tf.cast(tf.stack([image_shape[1], image_shape[2]] * 2), tf.float32)
  return boxes * scale


def decode_per_class(box_coder, encodings, proposals):
  """[B, P, q, 4] encodings against [B, P, 4] proposals -> [B, P, q, 4] boxes."""
  shape = tf.shape(encodings)
  anchors = tf.tile(proposals[:, :, None, :], [1, 1, shape[2], 1])
  boxes = box_coder.decode(tf.reshape(encodings, [-1, 4]), tf.reshape(anchors, [-1, 4]))
  boxes = tf.reshape(boxes, shape)
  boxes.set_shape(encodings.shape)
  return boxes


def boxes_of_best_class(boxes, scores_with_background):
  """[B, P, q, 4] -> [B, P, 4]: each proposal's box of its best-scoring class."""
  if boxes.shape[2] == 1:
    return boxes[:, :, 0]
  best = tf.argmax(scores_with_background[:, :, 1:], axis=2, output_type=tf.int32)
  return tf.gather(boxes, best, axis=2, batch_dims=2)


def masks_of_classes(mask_logits, classes):
  """[B*N, q, h, w] logits and [B, N] classes -> [B, N, h, w] probabilities."""
  height, width = mask_logits.shape[2], mask_logits.shape[3]
  batch_shape = tf.shape(classes)
  if mask_logits.shape[1] == 1:
    chosen = mask_logits[:, 0]
  else:
    chosen = tf.gather(mask_logits, tf.reshape(tf.cast(classes, tf.int32), [-1]), axis=1,
                       batch_dims=1)
  masks = tf.reshape(tf.sigmoid(chosen), tf.stack([batch_shape[0], batch_shape[1],
                                                   height, width]))
  masks.set_shape([classes.shape[0], classes.shape[1], height, width])
  return masks


def raw_detections(box_coder, refined_box_encodings, proposal_boxes, window):
  """Decoded boxes before NMS, for predict() (return_raw_detections_during_predict).

  Returns:
    {'raw_detection_boxes': [B, P, q, 4] relative to the true image, clipped
     to [0, 1], 'raw_detection_feature_map_indices': int32 zeros [B, P, q]}.
  """
  max_proposals = tf.shape(proposal_boxes)[1]
  num_boxes = refined_box_encodings.shape[1]
  encodings = tf.reshape(refined_box_encodings, tf.stack([-1, max_proposals, num_boxes, 4]))
  encodings.set_shape([None, None, num_boxes, 4])
  boxes = proposals_lib.to_window_frame(decode_per_class(box_coder, encodings, proposal_boxes),
                                        window, clip=False)
  boxes = tf.clip_by_value(boxes, 0.0, 1.0)
  return {'raw_detection_boxes': boxes,
          'raw_detection_feature_map_indices': tf.zeros_like(boxes[..., 0], tf.int32)}


def box_classifier_detections(box_coder, nms_fn, score_conversion_fn, refined_box_encodings,
                              class_logits, proposal_boxes, num_proposals, window,
                              mask_predictions=None):
  """Detections of the box classifier.

  Args:
    box_coder: the box coder of the refined encodings.
    nms_fn: fn(boxes [B, P, q, 4], scores [B, P, K], clip_window=...,
      change_coordinate_frame=True) -> (boxes, scores, classes, num).
    score_conversion_fn: fn(logits) -> scores.
    refined_box_encodings: float [B*P, q, 4].
    class_logits: float [B*P, K+1].
    proposal_boxes: float [B, P, 4] normalized to the preprocessed image.
    num_proposals: int32 [B].
    window: float [B, 4] true image windows (see proposals_lib.true_image_window).
    mask_predictions: optional float [B*P, q, h, w] mask logits.

  Returns:
    dict with detection_boxes [B, N, 4] (relative to the true image),
    detection_scores, detection_classes (0-based), detection_multiclass_scores
    [B, N, K+1], detection_anchor_indices [B, N], num_detections (float),
    raw_detection_boxes [B, P, 4], raw_detection_scores [B, P, K+1], and
    detection_masks [B, N, h, w] with mask_predictions.
  """
  max_proposals = tf.shape(proposal_boxes)[1]
  num_boxes = refined_box_encodings.shape[1]
  encodings = tf.reshape(refined_box_encodings, tf.stack([-1, max_proposals, num_boxes, 4]))
  encodings.set_shape([None, None, num_boxes, 4])
  boxes = decode_per_class(box_coder, encodings, proposal_boxes)
  logits = tf.reshape(class_logits, tf.stack([-1, max_proposals, class_logits.shape[1]]))
  all_scores = score_conversion_fn(logits)
  scores = masked_scores(all_scores[:, :, 1:], num_proposals)
  nms_boxes, nms_scores, nms_classes, num = nms_fn(boxes, scores, clip_window=window,
                                                   change_coordinate_frame=True)
  sources = detection_source_indices(nms_boxes, nms_scores, nms_classes,
                                     proposals_lib.to_window_frame(boxes, window), scores)
  results = fields.DetectionResultFields
  raw_boxes = proposals_lib.to_window_frame(boxes_of_best_class(boxes, all_scores), window,
                                            clip=False)
  detections = {
      results.detection_boxes: nms_boxes,
      results.detection_scores: nms_scores,
      results.detection_classes: nms_classes,
      results.detection_multiclass_scores: tf.gather(all_scores, sources, batch_dims=1),
      DETECTION_ANCHOR_INDICES: sources,
      results.num_detections: tf.cast(num, tf.float32),
      results.raw_detection_boxes: tf.clip_by_value(raw_boxes, 0.0, 1.0),
      results.raw_detection_scores: all_scores,
  }
  if mask_predictions is not None:
    tail_shape = tf.shape(mask_predictions)[1:]
    masks = tf.reshape(mask_predictions, tf.concat([[-1, max_proposals], tail_shape], axis=0))
    masks = tf.gather(masks, sources, batch_dims=1)
    masks = tf.reshape(masks, tf.concat([[-1], tail_shape], axis=0))
    masks.set_shape([None] + mask_predictions.shape[1:].as_list())
    detections[results.detection_masks] = masks_of_classes(masks, nms_classes)
  return detections
