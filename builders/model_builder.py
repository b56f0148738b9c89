"""Builds a model from a `DetectionModel` proto (protos/model.proto).

This is the only place that reads model protos; models/ and core/ take plain
constructor arguments. The `model` oneof picks the family:

    ssd              -> models.ssd_meta_arch.SSDMetaArch
    slim_classifier  -> models.slim_classifier.SlimClassifier

Each sub-message has a small builder here (image resizer, anchor generator,
box coder, matcher, box predictor, losses, hard example miner, post
processing). Bad configs raise ValueError naming the offending field.

Usage (what the trainer, evaluator and exporter do):

    from builders import model_builder
    create_model_fn = functools.partial(model_builder.build,
                                        model_config=pipeline_config.model,
                                        is_training=True)
    model = create_model_fn()
"""

from core import anchor_generator as anchor_generator_lib
from core import box_coder as box_coder_lib
from core import hard_example_miner as hard_example_miner_lib
from core import losses
from core import matcher as matcher_lib
from core import post_processing
from models import box_predictor as box_predictor_lib
from models import slim_classifier
from models import ssd_feature_extractors
from models import ssd_meta_arch
from protos import model_pb2

_BATCH_NORM_DECAY = 0.99


def _check_type(config, message_class, argument):
  """Raises ValueError, as the OD API's builders do, for a message of another type."""
  if not isinstance(config, message_class):
    raise ValueError('%s not of type model_pb2.%s.' % (argument, message_class.__name__))


def build(model_config, is_training, add_summaries=True):
  """Returns the model `model_config` describes.

  Args:
    model_config: a model_pb2.DetectionModel.
    is_training: whether the model is built for training.
    add_summaries: whether the model adds its own summaries.

  Returns:
    An SSDMetaArch (a core.model.DetectionModel) or a SlimClassifier (a
    core.model.ClassificationModel).

  Raises:
    ValueError: on a config of the wrong type, no model set, or a bad field.
  """
  _check_type(model_config, model_pb2.DetectionModel, 'model_config')
  kind = model_config.WhichOneof('model')
  if kind == 'ssd':
    return build_ssd(model_config.ssd, is_training, add_summaries)
  if kind == 'slim_classifier':
    return build_slim_classifier(model_config.slim_classifier, is_training, add_summaries)
  raise ValueError('model: no model set; set one of model.ssd or model.slim_classifier')


def build_slim_classifier(config, is_training, add_summaries=True):
  """Builds a SlimClassifier from a SlimClassifier proto.

  Like the SSD, the classifier built here returns its loss without adding it
  to GraphKeys.LOSSES: the trainer adds every returned loss once.

  Raises:
    ValueError: on a missing num_classes or an unknown net.
  """
  _check_type(config, model_pb2.SlimClassifier, 'slim_classifier_config')
  if not config.HasField('num_classes') or config.num_classes < 2:
    raise ValueError('slim_classifier.num_classes must be set to at least 2, got %d'
                     % config.num_classes)
  if config.net not in slim_classifier.NETS:
    raise ValueError('slim_classifier.net: unknown net %r; expected one of %s'
                     % (config.net, ', '.join(sorted(slim_classifier.NETS))))
  return slim_classifier.SlimClassifier(
      is_training=is_training,
      num_classes=config.num_classes,
      net=config.net,
      image_height=config.image_height,
      image_width=config.image_width,
      weight_decay=config.weight_decay,
      label_smoothing=config.label_smoothing,
      dropout_keep_prob=config.dropout_keep_prob,
      checkpoint_exclude_scopes=list(config.checkpoint_exclude_scopes),
      trainable_scopes=list(config.trainable_scopes),
      depth_multiplier=config.depth_multiplier,
      min_depth=config.min_depth,
      batch_norm_decay=_BATCH_NORM_DECAY,
      add_summaries=add_summaries,
      # The trainer and model_lib add the returned losses themselves.
      add_loss_to_collection=False)


def build_ssd(config, is_training, add_summaries=True):
  """Builds an SSDMetaArch from an Ssd proto.

  Raises:
    ValueError: on a missing num_classes or a bad sub-message.
  """
  _check_type(config, model_pb2.Ssd, 'ssd_config')
  if not config.HasField('num_classes') or config.num_classes < 1:
    raise ValueError('ssd.num_classes must be set to at least 1, got %d' % config.num_classes)
  anchor_generator = build_anchor_generator(config.anchor_generator)
  num_layers = len(anchor_generator.num_anchors_per_location())
  feature_extractor = build_feature_extractor(config.feature_extractor, is_training,
                                              num_layers)
  predictor = build_box_predictor(config.box_predictor, is_training, config.num_classes)
  classification_loss, localization_loss, cls_weight, loc_weight, miner = build_losses(
      config.loss)
  nms_fn, score_fn = build_post_processing(config.post_processing)
  return ssd_meta_arch.SSDMetaArch(
      is_training=is_training,
      anchor_generator=anchor_generator,
      box_predictor=predictor,
      box_coder=build_box_coder(config.box_coder),
      feature_extractor=feature_extractor,
      matcher=build_matcher(config.matcher),
      image_resizer_fn=build_image_resizer(config.image_resizer),
      non_max_suppression_fn=nms_fn,
      score_conversion_fn=score_fn,
      classification_loss=classification_loss,
      localization_loss=localization_loss,
      classification_loss_weight=cls_weight,
      localization_loss_weight=loc_weight,
      normalize_loss_by_num_matches=config.normalize_loss_by_num_matches,
      hard_example_miner=miner,
      add_summaries=add_summaries)


def build_image_resizer(config):
  """ImageResizer -> fn(images) -> (resized, true_image_shapes).

  Raises:
    ValueError: if no resizer is set.
  """
  _check_type(config, model_pb2.ImageResizer, 'image_resizer_config')
  kind = config.WhichOneof('image_resizer_oneof')
  if kind == 'fixed_shape_resizer':
    return ssd_meta_arch.fixed_shape_resizer(config.fixed_shape_resizer.height,
                                             config.fixed_shape_resizer.width)
  raise ValueError('ssd.image_resizer: set fixed_shape_resizer (the only resizer an SSD '
                   'supports here)')


def build_feature_extractor(config, is_training, num_layers):
  """SsdFeatureExtractor -> an SSDFeatureExtractor making num_layers maps.

  Raises:
    ValueError: on an unknown type.
  """
  _check_type(config, model_pb2.SsdFeatureExtractor, 'feature_extractor_config')
  if config.type not in ssd_feature_extractors.FEATURE_EXTRACTORS:
    raise ValueError('ssd.feature_extractor.type: unknown feature extractor %r; expected '
                     'one of %s' % (config.type,
                                    ', '.join(sorted(ssd_feature_extractors.FEATURE_EXTRACTORS))))
  return ssd_feature_extractors.FEATURE_EXTRACTORS[config.type](
      is_training=is_training,
      depth_multiplier=config.depth_multiplier,
      min_depth=config.min_depth,
      num_layers=num_layers,
      weight_decay=config.weight_decay,
      use_batch_norm=config.use_batch_norm,
      batch_norm_decay=_BATCH_NORM_DECAY)


def build_box_coder(config):
  """BoxCoder -> FasterRcnnBoxCoder (the default when none is set)."""
  _check_type(config, model_pb2.BoxCoder, 'box_coder_config')
  coder = config.faster_rcnn_box_coder
  return box_coder_lib.FasterRcnnBoxCoder(
      [coder.y_scale, coder.x_scale, coder.height_scale, coder.width_scale])


def build_matcher(config):
  """ArgMaxMatcher proto -> core.matcher.ArgMaxMatcher.

  Raises:
    ValueError: if unmatched_threshold exceeds matched_threshold.
  """
  _check_type(config, model_pb2.ArgMaxMatcher, 'matcher_config')
  if config.ignore_thresholds:
    return matcher_lib.ArgMaxMatcher(None, None,
                                     force_match_for_each_row=config.force_match_for_each_row)
  if config.unmatched_threshold > config.matched_threshold:
    raise ValueError('ssd.matcher.unmatched_threshold (%s) must not exceed '
                     'matched_threshold (%s)' % (config.unmatched_threshold,
                                                 config.matched_threshold))
  return matcher_lib.ArgMaxMatcher(
      config.matched_threshold, config.unmatched_threshold,
      negatives_lower_than_unmatched=config.negatives_lower_than_unmatched,
      force_match_for_each_row=config.force_match_for_each_row)


def build_anchor_generator(config):
  """AnchorGenerator -> MultipleGridAnchorGenerator.

  Raises:
    ValueError: if no generator is set or its fields are bad.
  """
  _check_type(config, model_pb2.AnchorGenerator, 'anchor_generator_config')
  if config.WhichOneof('anchor_generator_oneof') != 'ssd_anchor_generator':
    raise ValueError('ssd.anchor_generator: set ssd_anchor_generator')
  ssd = config.ssd_anchor_generator
  if ssd.num_layers < 1:
    raise ValueError('ssd.anchor_generator.ssd_anchor_generator.num_layers must be at '
                     'least 1, got %d' % ssd.num_layers)
  if not 0 < ssd.min_scale <= ssd.max_scale:
    raise ValueError('ssd.anchor_generator.ssd_anchor_generator needs 0 < min_scale <= '
                     'max_scale, got %s and %s' % (ssd.min_scale, ssd.max_scale))
  aspect_ratios = list(ssd.aspect_ratios) or [1.0, 2.0, 0.5, 3.0, 1.0 / 3]
  if any(ratio <= 0 for ratio in aspect_ratios):
    raise ValueError('ssd.anchor_generator.ssd_anchor_generator.aspect_ratios must be '
                     'positive, got %s' % aspect_ratios)
  return anchor_generator_lib.create_ssd_anchors(
      num_layers=ssd.num_layers,
      min_scale=ssd.min_scale,
      max_scale=ssd.max_scale,
      aspect_ratios=aspect_ratios,
      interpolated_scale_aspect_ratio=ssd.interpolated_scale_aspect_ratio,
      base_anchor_size=[ssd.base_anchor_height, ssd.base_anchor_width],
      reduce_boxes_in_lowest_layer=ssd.reduce_boxes_in_lowest_layer)


def build_box_predictor(config, is_training, num_classes):
  """BoxPredictor -> ConvolutionalBoxPredictor (defaults when none is set)."""
  _check_type(config, model_pb2.BoxPredictor, 'box_predictor_config')
  conv = config.convolutional_box_predictor
  if conv.max_depth and conv.min_depth > conv.max_depth:
    raise ValueError('ssd.box_predictor.convolutional_box_predictor.min_depth (%d) exceeds '
                     'max_depth (%d)' % (conv.min_depth, conv.max_depth))
  return box_predictor_lib.ConvolutionalBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      min_depth=conv.min_depth,
      max_depth=conv.max_depth,
      num_layers_before_predictor=conv.num_layers_before_predictor,
      use_dropout=conv.use_dropout,
      dropout_keep_prob=conv.dropout_keep_probability,
      kernel_size=conv.kernel_size,
      class_prediction_bias_init=conv.class_prediction_bias_init,
      weight_decay=conv.weight_decay,
      use_batch_norm=conv.use_batch_norm,
      batch_norm_decay=_BATCH_NORM_DECAY)


def build_losses(config):
  """Loss proto -> (classification_loss, localization_loss, cls_weight, loc_weight, miner).

  Defaults when unset: sigmoid classification, smooth L1 (delta 1), no miner.
  """
  _check_type(config, model_pb2.Loss, 'loss_config')
  cls_kind = config.classification_loss.WhichOneof('classification_loss')
  if cls_kind == 'weighted_softmax':
    classification_loss = losses.WeightedSoftmaxClassificationLoss(
        logit_scale=config.classification_loss.weighted_softmax.logit_scale)
  elif cls_kind == 'weighted_sigmoid_focal':
    focal = config.classification_loss.weighted_sigmoid_focal
    classification_loss = losses.SigmoidFocalClassificationLoss(
        gamma=focal.gamma, alpha=focal.alpha if focal.HasField('alpha') else None)
  else:
    classification_loss = losses.WeightedSigmoidClassificationLoss()
  delta = 1.0
  if config.localization_loss.WhichOneof('localization_loss') == 'weighted_smooth_l1':
    delta = config.localization_loss.weighted_smooth_l1.delta
  localization_loss = losses.WeightedSmoothL1LocalizationLoss(delta=delta)
  miner = None
  if config.HasField('hard_example_miner'):
    miner = build_hard_example_miner(config.hard_example_miner,
                                     config.classification_weight,
                                     config.localization_weight)
  return (classification_loss, localization_loss, config.classification_weight,
          config.localization_weight, miner)


def build_hard_example_miner(config, classification_weight, localization_weight):
  """HardExampleMiner proto -> core.hard_example_miner.HardExampleMiner."""
  _check_type(config, model_pb2.HardExampleMiner, 'hard_example_miner_config')
  loss_type = {
      model_pb2.HardExampleMiner.BOTH: 'both',
      model_pb2.HardExampleMiner.CLASSIFICATION: 'cls',
      model_pb2.HardExampleMiner.LOCALIZATION: 'loc',
  }[config.loss_type]
  if config.num_hard_examples < 0:
    raise ValueError('ssd.loss.hard_example_miner.num_hard_examples must not be negative, '
                     'got %d' % config.num_hard_examples)
  return hard_example_miner_lib.HardExampleMiner(
      num_hard_examples=config.num_hard_examples or None,
      iou_threshold=config.iou_threshold,
      loss_type=loss_type,
      cls_loss_weight=classification_weight,
      loc_loss_weight=localization_weight,
      max_negatives_per_positive=config.max_negatives_per_positive or None,
      min_negatives_per_image=config.min_negatives_per_image)


def build_post_processing(config):
  """PostProcessing -> (non_max_suppression_fn, score_conversion_fn).

  Raises:
    ValueError: on bad NMS thresholds.
  """
  _check_type(config, model_pb2.PostProcessing, 'post_processing_config')
  nms = config.batch_non_max_suppression
  if not 0.0 <= nms.iou_threshold <= 1.0:
    raise ValueError('ssd.post_processing.batch_non_max_suppression.iou_threshold must be '
                     'in [0, 1], got %s' % nms.iou_threshold)
  if nms.max_detections_per_class < 1 or nms.max_total_detections < 1:
    raise ValueError('ssd.post_processing.batch_non_max_suppression: '
                     'max_detections_per_class and max_total_detections must be positive')
  converter = model_pb2.PostProcessing.ScoreConverter.Name(config.score_converter)
  if config.logit_scale <= 0:
    raise ValueError('ssd.post_processing.logit_scale must be positive, got %s'
                     % config.logit_scale)
  return (post_processing.non_max_suppression_fn(
      score_thresh=nms.score_threshold, iou_thresh=nms.iou_threshold,
      max_size_per_class=nms.max_detections_per_class,
      max_total_size=nms.max_total_detections),
          post_processing.score_converter_fn(converter, config.logit_scale))
