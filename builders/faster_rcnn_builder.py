"""Builds a two-stage detector from a `FasterRcnn` proto (protos/faster_rcnn.proto).

The second stage's box predictor picks the meta-architecture, as in the OD API:

    second_stage_box_predictor.mask_rcnn_box_predictor -> FasterRCNNMetaArch
        (Faster R-CNN; Mask R-CNN when it predicts instance masks)
    second_stage_box_predictor.rfcn_box_predictor      -> RFCNMetaArch

Everything else comes from the sub-builders the SSD uses too (image resizer,
anchor generator, hyperparams, post-processing, losses) and from
builders/feature_extractor_registry.py for `feature_extractor.type`.

    model = faster_rcnn_builder.build(pipeline_config.model.faster_rcnn, is_training=True)

Fields the OD API's schema has but slimtrain does not build are refused by
their path (e.g. `model.faster_rcnn.context_config`: Context R-CNN).
Accepted without effect, because they only choose between equivalent
implementations on TPUs: `use_static_shapes_for_eval`,
`use_partitioned_nms_in_first_stage`, `use_combined_nms_in_first_stage`,
`use_matmul_gather_in_matcher`.
"""

from builders import anchor_generator_builder
from builders import box_predictor_builder
from builders import config_checks
from builders import feature_extractor_registry
from builders import hyperparams_builder
from builders import image_resizer_builder
from builders import losses_builder
from builders import post_processing_builder
from core import balanced_positive_negative_sampler as sampler
from core import post_processing
from models import faster_rcnn_meta_arch
from models import rfcn_meta_arch
from models import two_stage_ops
from protos import faster_rcnn_pb2

PATH = 'model.faster_rcnn'
_REFUSED = {
    'context_config': 'Context R-CNN (attention over context features) is not implemented',
    'use_static_shapes': 'the static-shape (TPU) variant of the two-stage model is not '
                         'implemented; shapes are dynamic',
    'use_static_balanced_label_sampler': 'only with use_static_shapes',
    'inplace_batchnorm_update': 'the two-stage extractors keep batch norm frozen unless '
                                'feature_extractor.batch_norm_trainable',
}


def build(config, is_training, add_summaries=True):
  """Returns the FasterRCNNMetaArch or RFCNMetaArch `config` describes.

  Args:
    config: a faster_rcnn_pb2.FasterRcnn.
    is_training: whether the model is built for training.
    add_summaries: whether the model adds its own summaries.

  Raises:
    ValueError: on a missing num_classes, an unsupported or bad field (named by
      its path in the pipeline config).
  """
  if not isinstance(config, faster_rcnn_pb2.FasterRcnn):
    raise ValueError('faster_rcnn_config not of type faster_rcnn_pb2.FasterRcnn.')
  config_checks.refuse_unsupported(config, PATH, supported=_SUPPORTED, why=_REFUSED)
  predictor_kind = config_checks.oneof_choice(
      config.second_stage_box_predictor, 'box_predictor_oneof',
      PATH + '.second_stage_box_predictor', box_predictor_builder.TWO_STAGE_KINDS,
      why=dict.fromkeys(box_predictor_builder.SINGLE_STAGE_KINDS,
                        'an SSD box predictor; the second stage takes '
                        'mask_rcnn_box_predictor or rfcn_box_predictor'))
  if predictor_kind is None:
    raise ValueError('%s.second_stage_box_predictor: set mask_rcnn_box_predictor or '
                     'rfcn_box_predictor' % PATH)
  _check_numbers(config, is_training, predictor_kind)
  kwargs = _common_kwargs(config, is_training, add_summaries)
  predictor = box_predictor_builder.build(
      hyperparams_builder.build, config.second_stage_box_predictor, is_training,
      config.num_classes, path=PATH + '.second_stage_box_predictor')
  if predictor_kind == 'rfcn_box_predictor':
    return rfcn_meta_arch.RFCNMetaArch(second_stage_rfcn_box_predictor=predictor, **kwargs)
  return faster_rcnn_meta_arch.FasterRCNNMetaArch(
      initial_crop_size=config.initial_crop_size,
      maxpool_kernel_size=config.maxpool_kernel_size,
      maxpool_stride=config.maxpool_stride,
      second_stage_mask_rcnn_box_predictor=predictor,
      second_stage_mask_prediction_loss_weight=config.second_stage_mask_prediction_loss_weight,
      **kwargs)


def build_feature_extractor(config, is_training, path=PATH + '.feature_extractor'):
  """FasterRcnnFeatureExtractor proto -> a FasterRCNNFeatureExtractor."""
  if not isinstance(config, faster_rcnn_pb2.FasterRcnnFeatureExtractor):
    raise ValueError('feature_extractor_config not of type '
                     'faster_rcnn_pb2.FasterRcnnFeatureExtractor.')
  extractor_class = feature_extractor_registry.lookup_faster_rcnn(config.type, path + '.type')
  if config.first_stage_features_stride < 1:
    raise ValueError('%s.first_stage_features_stride must be positive, got %d'
                     % (path, config.first_stage_features_stride))
  return extractor_class(is_training=is_training,
                         first_stage_features_stride=config.first_stage_features_stride,
                         batch_norm_trainable=config.batch_norm_trainable,
                         reuse_weights=None)


def _check_numbers(config, is_training, predictor_kind):
  """The checks of counts and thresholds, each naming its field."""
  if not config.HasField('num_classes') or config.num_classes < 1:
    raise ValueError('%s.num_classes must be set to at least 1, got %d'
                     % (PATH, config.num_classes))
  if config.number_of_stages not in (1, 2, 3):
    raise ValueError('%s.number_of_stages must be 1, 2 or 3, got %d'
                     % (PATH, config.number_of_stages))
  if not 0.0 <= config.first_stage_nms_iou_threshold <= 1.0:
    raise ValueError('%s.first_stage_nms_iou_threshold must be in [0, 1], got %s'
                     % (PATH, config.first_stage_nms_iou_threshold))
  for field in ('first_stage_positive_balance_fraction', 'second_stage_balance_fraction'):
    if not 0.0 <= getattr(config, field) <= 1.0:
      raise ValueError('%s.%s must be in [0, 1], got %s' % (PATH, field, getattr(config, field)))
  for field in ('first_stage_max_proposals', 'first_stage_minibatch_size',
                'second_stage_batch_size', 'first_stage_box_predictor_depth',
                'first_stage_box_predictor_kernel_size', 'first_stage_atrous_rate'):
    if getattr(config, field) < 1:
      raise ValueError('%s.%s must be positive, got %d' % (PATH, field, getattr(config, field)))
  if is_training and config.second_stage_batch_size > config.first_stage_max_proposals:
    raise ValueError('%s.second_stage_batch_size (%d) must not exceed '
                     'first_stage_max_proposals (%d)'
                     % (PATH, config.second_stage_batch_size, config.first_stage_max_proposals))
  if predictor_kind == 'mask_rcnn_box_predictor':
    for field in ('initial_crop_size', 'maxpool_kernel_size', 'maxpool_stride'):
      if getattr(config, field) < 1:
        raise ValueError('%s.%s must be set to a positive value for a '
                         'mask_rcnn_box_predictor second stage, got %d'
                         % (PATH, field, getattr(config, field)))


def _common_kwargs(config, is_training, add_summaries):
  """The constructor arguments Faster R-CNN and R-FCN share."""
  second_stage_nms_fn, score_conversion_fn = post_processing_builder.build(
      config.second_stage_post_processing, PATH + '.second_stage_post_processing')
  classification_loss = losses_builder.build_faster_rcnn_classification_loss(
      config.second_stage_classification_loss, PATH + '.second_stage_classification_loss')
  miner = None
  if config.HasField('hard_example_miner'):
    miner = losses_builder.build_hard_example_miner(
        config.hard_example_miner, config.second_stage_classification_loss_weight,
        config.second_stage_localization_loss_weight, PATH + '.hard_example_miner')
  return dict(
      is_training=is_training,
      num_classes=config.num_classes,
      image_resizer_fn=image_resizer_builder.build(config.image_resizer,
                                                   PATH + '.image_resizer'),
      feature_extractor=build_feature_extractor(config.feature_extractor, is_training),
      number_of_stages=config.number_of_stages,
      first_stage_anchor_generator=anchor_generator_builder.build(
          config.first_stage_anchor_generator, PATH + '.first_stage_anchor_generator'),
      first_stage_target_assigner=faster_rcnn_meta_arch.create_faster_rcnn_target_assigner(
          'proposal'),
      first_stage_atrous_rate=config.first_stage_atrous_rate,
      first_stage_box_predictor_arg_scope_fn=hyperparams_builder.build(
          config.first_stage_box_predictor_conv_hyperparams, is_training,
          PATH + '.first_stage_box_predictor_conv_hyperparams'),
      first_stage_box_predictor_kernel_size=config.first_stage_box_predictor_kernel_size,
      first_stage_box_predictor_depth=config.first_stage_box_predictor_depth,
      first_stage_minibatch_size=config.first_stage_minibatch_size,
      first_stage_sampler=sampler.BalancedPositiveNegativeSampler(
          positive_fraction=config.first_stage_positive_balance_fraction),
      first_stage_non_max_suppression_fn=post_processing.non_max_suppression_fn(
          score_thresh=config.first_stage_nms_score_threshold,
          iou_thresh=config.first_stage_nms_iou_threshold,
          max_size_per_class=config.first_stage_max_proposals,
          max_total_size=config.first_stage_max_proposals),
      first_stage_max_proposals=config.first_stage_max_proposals,
      first_stage_localization_loss_weight=config.first_stage_localization_loss_weight,
      first_stage_objectness_loss_weight=config.first_stage_objectness_loss_weight,
      crop_and_resize_fn=(two_stage_ops.matmul_crop_and_resize
                          if config.use_matmul_crop_and_resize
                          else two_stage_ops.native_crop_and_resize),
      second_stage_target_assigner=faster_rcnn_meta_arch.create_faster_rcnn_target_assigner(
          'detection'),
      second_stage_batch_size=config.second_stage_batch_size,
      second_stage_sampler=sampler.BalancedPositiveNegativeSampler(
          positive_fraction=config.second_stage_balance_fraction),
      second_stage_non_max_suppression_fn=second_stage_nms_fn,
      second_stage_score_conversion_fn=score_conversion_fn,
      second_stage_localization_loss_weight=config.second_stage_localization_loss_weight,
      second_stage_classification_loss=classification_loss,
      second_stage_classification_loss_weight=config.second_stage_classification_loss_weight,
      hard_example_miner=miner,
      add_summaries=add_summaries,
      clip_anchors_to_image=config.clip_anchors_to_image,
      resize_masks=config.resize_masks,
      return_raw_detections_during_predict=config.return_raw_detections_during_predict,
      output_final_box_features=config.output_final_box_features)


# The FasterRcnn fields `build` reads or accepts; the others are refused by name.
_SUPPORTED = (
    'number_of_stages', 'num_classes', 'image_resizer', 'feature_extractor',
    'first_stage_anchor_generator', 'first_stage_atrous_rate',
    'first_stage_box_predictor_conv_hyperparams', 'first_stage_box_predictor_kernel_size',
    'first_stage_box_predictor_depth', 'first_stage_minibatch_size',
    'first_stage_positive_balance_fraction', 'first_stage_nms_score_threshold',
    'first_stage_nms_iou_threshold', 'first_stage_max_proposals',
    'first_stage_localization_loss_weight', 'first_stage_objectness_loss_weight',
    'initial_crop_size', 'maxpool_kernel_size', 'maxpool_stride', 'second_stage_box_predictor',
    'second_stage_batch_size', 'second_stage_balance_fraction', 'second_stage_post_processing',
    'second_stage_localization_loss_weight', 'second_stage_classification_loss_weight',
    'second_stage_mask_prediction_loss_weight', 'hard_example_miner',
    'second_stage_classification_loss', 'use_matmul_crop_and_resize', 'clip_anchors_to_image',
    'use_matmul_gather_in_matcher', 'resize_masks', 'use_static_shapes_for_eval',
    'use_partitioned_nms_in_first_stage', 'return_raw_detections_during_predict',
    'use_combined_nms_in_first_stage', 'output_final_box_features')
