"""Builds non-max suppression and score conversion from a `PostProcessing` proto.

    nms_fn, score_fn = post_processing_builder.build(ssd_config.post_processing)
    scores = score_fn(logits)                       # IDENTITY, SIGMOID or SOFTMAX
    boxes, scores, classes, num = nms_fn(decoded_boxes, scores[:, :, 1:], clip_window=w)

Accepted without effect on the result: `use_static_shapes`,
`use_partitioned_nms` and `use_combined_nms` (the OD API's TPU/speed
variants of the same suppression; our outputs are always padded to
max_total_detections). Refused by name: class-agnostic NMS, soft NMS,
`change_coordinate_frame: false` and score calibration.
"""

from builders import config_checks
from core import post_processing
from protos import post_processing_pb2


def build(post_processing_config, path='model.ssd.post_processing'):
  """Returns (non_max_suppression_fn, score_conversion_fn).

  Raises:
    ValueError: on a config of another type, bad thresholds or an unsupported
      option (named).
  """
  if not isinstance(post_processing_config, post_processing_pb2.PostProcessing):
    raise ValueError('post_processing_config not of type '
                     'post_processing_pb2.Postprocessing.')
  config_checks.refuse_unsupported(
      post_processing_config, path,
      supported=('batch_non_max_suppression', 'score_converter', 'logit_scale'),
      why={'calibration_config': 'score calibration is not implemented'})
  nms = post_processing_config.batch_non_max_suppression
  nms_path = path + '.batch_non_max_suppression'
  config_checks.refuse_unsupported(
      nms, nms_path,
      supported=('score_threshold', 'iou_threshold', 'max_detections_per_class',
                 'max_total_detections', 'use_static_shapes', 'use_partitioned_nms',
                 'use_combined_nms', 'use_hard_nms'),
      why={'use_class_agnostic_nms': 'class-agnostic NMS is not implemented',
           'max_classes_per_detection': 'only with class-agnostic NMS',
           'soft_nms_sigma': 'soft NMS is not implemented',
           'change_coordinate_frame': 'boxes are always given relative to the image '
                                      'content'})
  if not 0.0 <= nms.iou_threshold <= 1.0:
    raise ValueError('%s.iou_threshold must be in [0, 1], got %s'
                     % (nms_path, nms.iou_threshold))
  if nms.max_detections_per_class < 1 or nms.max_total_detections < 1:
    raise ValueError('%s: max_detections_per_class and max_total_detections must be '
                     'positive' % nms_path)
  if post_processing_config.logit_scale <= 0:
    raise ValueError('%s.logit_scale must be positive, got %s'
                     % (path, post_processing_config.logit_scale))
  converter = post_processing_pb2.PostProcessing.ScoreConverter.Name(
      post_processing_config.score_converter)
  nms_fn = post_processing.non_max_suppression_fn(
      score_thresh=nms.score_threshold, iou_thresh=nms.iou_threshold,
      max_size_per_class=nms.max_detections_per_class,
      max_total_size=nms.max_total_detections)
  return nms_fn, post_processing.score_converter_fn(converter,
                                                    post_processing_config.logit_scale)
