"""Test helpers for the zoo's two-stage detectors: their shapes, as our model configs.

`TWO_STAGE_ARCHITECTURES` lists, for each of the OD API's 27 TF1 two-stage
sample configs (faster_rcnn_*, mask_rcnn_*, rfcn_*), the facts of its model
block that decide the variables or the way it trains: extractor type,
first-stage stride and atrous rate, number of classes and stages, the
second-stage crop, the box predictor (with its mask head) and the resizer.
`faster_rcnn_model_config` writes a `model { faster_rcnn { ... } }` block of
those facts in our own words, so each sample's layout can be compared with
`zoo_testlib.reference_variables(name + '.config')`.

    facts = zoo_two_stage_testlib.TWO_STAGE_ARCHITECTURES['faster_rcnn_resnet50_coco']
    text = zoo_two_stage_testlib.faster_rcnn_model_config(facts, image_size=96)
"""

import collections

Architecture = collections.namedtuple(
    'Architecture', ['type', 'stride', 'num_classes', 'stages', 'crop', 'masks', 'rfcn',
                     'max_proposals', 'second_stage_batch_size', 'fixed_size'])
Architecture.__new__.__defaults__ = (2, 14, None, False, 300, 64, None)

# (initial_crop_size, maxpool kernel, maxpool stride) of each backbone family.
_RESNET_CROP = (14, 2, 2)
_IRV2_CROP = (17, 1, 1)
# Mask heads: (mask_height, mask_width, conv layers, conv depth; 0 = from num_classes).
_BIG_MASKS = (33, 33, 4, 0)
_SMALL_MASKS = (15, 15, 2, 0)


def _arch(extractor, stride, num_classes, **facts):
  crop = _IRV2_CROP if extractor in ('faster_rcnn_inception_resnet_v2',
                                     'faster_rcnn_nas') else _RESNET_CROP
  return Architecture(type=extractor, stride=stride, num_classes=num_classes,
                      crop=facts.pop('crop', crop), **facts)


_R50, _R101, _R152 = 'faster_rcnn_resnet50', 'faster_rcnn_resnet101', 'faster_rcnn_resnet152'
_IV2, _IRV2 = 'faster_rcnn_inception_v2', 'faster_rcnn_inception_resnet_v2'
TWO_STAGE_ARCHITECTURES = {
    'faster_rcnn_inception_resnet_v2_atrous_coco': _arch(_IRV2, 8, 90),
    'faster_rcnn_inception_resnet_v2_atrous_cosine_lr_coco': _arch(_IRV2, 8, 90),
    'faster_rcnn_inception_resnet_v2_atrous_oid': _arch(_IRV2, 8, 546),
    'faster_rcnn_inception_resnet_v2_atrous_oid_v4': _arch(_IRV2, 8, 601),
    'faster_rcnn_inception_resnet_v2_atrous_pets': _arch(_IRV2, 8, 37),
    'faster_rcnn_inception_v2_coco': _arch(_IV2, 16, 90),
    'faster_rcnn_inception_v2_pets': _arch(_IV2, 16, 37),
    'faster_rcnn_nas_coco': _arch('faster_rcnn_nas', 16, 90, max_proposals=500,
                                  fixed_size=1200),
    'faster_rcnn_resnet101_atrous_coco': _arch(_R101, 8, 90),
    'faster_rcnn_resnet101_ava_v2.1': _arch(_R101, 16, 80),
    'faster_rcnn_resnet101_coco': _arch(_R101, 16, 90),
    'faster_rcnn_resnet101_fgvc': _arch(_R101, 16, 2854, max_proposals=32,
                                        second_stage_batch_size=32),
    'faster_rcnn_resnet101_kitti': _arch(_R101, 16, 2),
    'faster_rcnn_resnet101_pets': _arch(_R101, 16, 37),
    'faster_rcnn_resnet101_voc07': _arch(_R101, 16, 20),
    'faster_rcnn_resnet152_coco': _arch(_R152, 16, 90),
    'faster_rcnn_resnet152_pets': _arch(_R152, 16, 37),
    'faster_rcnn_resnet50_coco': _arch(_R50, 16, 90),
    'faster_rcnn_resnet50_fgvc': _arch(_R50, 16, 2854, max_proposals=32,
                                       second_stage_batch_size=32),
    'faster_rcnn_resnet50_pets': _arch(_R50, 16, 37),
    'mask_rcnn_inception_resnet_v2_atrous_coco': _arch(_IRV2, 8, 90, stages=3,
                                                       masks=_BIG_MASKS),
    'mask_rcnn_inception_v2_coco': _arch(_IV2, 16, 90, stages=3, masks=_SMALL_MASKS),
    'mask_rcnn_resnet101_atrous_coco': _arch(_R101, 8, 90, stages=3, masks=_BIG_MASKS),
    'mask_rcnn_resnet101_pets': _arch(_R101, 16, 37, stages=3, masks=(15, 15, 2, 256)),
    'mask_rcnn_resnet50_atrous_coco': _arch(_R50, 8, 90, stages=3, masks=_BIG_MASKS),
    'rfcn_resnet101_coco': _arch(_R101, 16, 90, rfcn=True, crop=(0, 0, 0)),
    'rfcn_resnet101_pets': _arch(_R101, 16, 37, rfcn=True, crop=(0, 0, 0)),
}

_CONV = ('op: CONV regularizer { l2_regularizer { weight: 0.0 } } '
         'initializer { truncated_normal_initializer { stddev: 0.01 } }')
_FC = ('op: FC regularizer { l2_regularizer { weight: 0.0 } } '
       'initializer { variance_scaling_initializer { factor: 1.0 uniform: true mode: FAN_AVG } }')


def _predictor_text(facts):
  """The second_stage_box_predictor block, one field a line (indented for the config)."""
  if facts.rfcn:
    lines = ['rfcn_box_predictor {', '  conv_hyperparams { %s }' % _CONV,
             '  crop_height: 18', '  crop_width: 18', '  num_spatial_bins_height: 3',
             '  num_spatial_bins_width: 3', '}']
  else:
    lines = ['mask_rcnn_box_predictor {', '  use_dropout: false',
             '  dropout_keep_probability: 1.0', '  fc_hyperparams { %s }' % _FC]
    if facts.masks:
      height, width, layers, depth = facts.masks
      lines += ['  predict_instance_masks: true', '  mask_height: %d' % height,
                '  mask_width: %d' % width, '  mask_prediction_num_conv_layers: %d' % layers,
                '  mask_prediction_conv_depth: %d' % depth,
                '  conv_hyperparams { %s }' % _CONV]
    lines.append('}')
  return '\n    '.join(lines)


def faster_rcnn_model_config(facts, image_size=None, num_classes=None, max_proposals=None):
  """DetectionModel text of a two-stage detector with `facts` (an Architecture).

  Args:
    facts: a TWO_STAGE_ARCHITECTURES entry.
    image_size: fixed_shape_resizer side to train small (default: the
      sample's resizer, keep_aspect_ratio 600..1024 or its fixed size).
    num_classes: override the sample's number of classes.
    max_proposals: override first_stage_max_proposals (and the second-stage
      batch size and detections with it), to train small.
  """
  if image_size:
    resizer = 'fixed_shape_resizer { height: %d width: %d }' % (image_size, image_size)
  elif facts.fixed_size:
    resizer = 'fixed_shape_resizer { height: %d width: %d }' % ((facts.fixed_size,) * 2)
  else:
    resizer = 'keep_aspect_ratio_resizer { min_dimension: 600 max_dimension: 1024 }'
  proposals = max_proposals or facts.max_proposals
  batch = min(facts.second_stage_batch_size, proposals)
  crop, kernel, stride = facts.crop
  crop_text = '' if facts.rfcn else (
      'initial_crop_size: %d\n  maxpool_kernel_size: %d\n  maxpool_stride: %d'
      % (crop, kernel, stride))
  return """
faster_rcnn {
  num_classes: %d
  number_of_stages: %d
  image_resizer { %s }
  feature_extractor { type: "%s" first_stage_features_stride: %d }
  first_stage_anchor_generator {
    grid_anchor_generator {
      scales: [0.25, 0.5, 1.0, 2.0]
      aspect_ratios: [0.5, 1.0, 2.0]
      height_stride: %d
      width_stride: %d
    }
  }
  first_stage_atrous_rate: %d
  first_stage_box_predictor_conv_hyperparams { %s }
  first_stage_nms_score_threshold: 0.0
  first_stage_nms_iou_threshold: 0.7
  first_stage_max_proposals: %d
  first_stage_localization_loss_weight: 2.0
  first_stage_objectness_loss_weight: 1.0
  %s
  second_stage_batch_size: %d
  second_stage_box_predictor {
    %s
  }
  second_stage_post_processing {
    batch_non_max_suppression { score_threshold: 0.0 iou_threshold: 0.6
                                max_detections_per_class: %d max_total_detections: %d }
    score_converter: SOFTMAX
  }
  second_stage_localization_loss_weight: 2.0
  second_stage_classification_loss_weight: 1.0
  %s
}
""" % (num_classes or facts.num_classes, facts.stages, resizer, facts.type, facts.stride,
       facts.stride, facts.stride, 2 if facts.stride == 8 else 1, _CONV, proposals, crop_text,
       batch, _predictor_text(facts), min(100, proposals), min(100, proposals),
       'second_stage_mask_prediction_loss_weight: 4.0' if facts.masks else '')
