"""Builds a model from a `DetectionModel` proto (protos/model.proto).

This is the only place that reads model protos; models/ and core/ take plain
constructor arguments. The `model` oneof picks the family:

    ssd              -> models.ssd_meta_arch.SSDMetaArch (any extractor of
                        builders/feature_extractor_registry.py)
    slim_classifier  -> models.slim_classifier.SlimClassifier
    faster_rcnn      -> models.faster_rcnn_meta_arch.FasterRCNNMetaArch, or
                        models.rfcn_meta_arch.RFCNMetaArch with an
                        rfcn_box_predictor (builders/faster_rcnn_builder.py)

Each sub-message has its own builder, as in the OD API (image_resizer_builder,
anchor_generator_builder, box_coder_builder, matcher_builder,
region_similarity_calculator_builder, box_predictor_builder,
hyperparams_builder, losses_builder, post_processing_builder). Bad configs
raise ValueError naming the offending field; a field the OD API's schema has
but slimtrain does not build is refused by its path (builders/config_checks.py)
rather than ignored.

Usage (what the trainer, evaluator and exporter do):

    from builders import model_builder
    create_model_fn = functools.partial(model_builder.build,
                                        model_config=pipeline_config.model,
                                        is_training=True)
    model = create_model_fn()
"""

from builders import anchor_generator_builder
from builders import box_coder_builder
from builders import box_predictor_builder
from builders import config_checks
from builders import faster_rcnn_builder
from builders import feature_extractor_registry
from builders import hyperparams_builder
from builders import image_resizer_builder
from builders import losses_builder
from builders import matcher_builder
from builders import post_processing_builder
from builders import region_similarity_calculator_builder
from models import slim_classifier
from models import ssd_meta_arch
from protos import model_pb2
from protos import ssd_pb2

_BATCH_NORM_DECAY = 0.99


def _check_type(config, message_class, argument):
  """Raises ValueError, as the OD API's builders do, for a message of another type."""
  if not isinstance(config, message_class):
    module = message_class.__module__.rsplit('.', 1)[-1]
    raise ValueError('%s not of type %s.%s.' % (argument, module, message_class.__name__))


def build(model_config, is_training, add_summaries=True):
  """Returns the model `model_config` describes.

  Args:
    model_config: a model_pb2.DetectionModel.
    is_training: whether the model is built for training.
    add_summaries: whether the model adds its own summaries.

  Returns:
    An SSDMetaArch, FasterRCNNMetaArch or RFCNMetaArch (a
    core.model.DetectionModel) or a SlimClassifier (a
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
  if kind == 'faster_rcnn':
    return faster_rcnn_builder.build(model_config.faster_rcnn, is_training, add_summaries)
  if kind == 'experimental_model':
    raise ValueError('model.experimental_model is set, but slimtrain does not build it: '
                     'the OD API looks its models up in a registry slimtrain does not have')
  raise ValueError('model: no model set; set one of model.ssd, model.faster_rcnn or '
                   'model.slim_classifier')


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
  """Builds an SSDMetaArch from an Ssd proto, as the OD API's model builder does.

  Every image_resizer the OD API's SSD takes is built: a resizer without a
  fixed output size (keep_aspect_ratio_resizer without pad_to_max_dimension,
  identity_resizer; the ssd_mobilenet_v2_fullyconv sample) gives images whose
  size is known only when the graph runs, and the SSD then places its
  anchors with TF ops.

  Raises:
    ValueError: on a missing num_classes, a field set that is not built, or
      a bad sub-message (each named by its path in the pipeline config).
  """
  _check_type(config, ssd_pb2.Ssd, 'ssd_config')
  config_checks.refuse_unsupported(config, _SSD_PATH, supported=_SSD_FIELDS,
                                   why=_SSD_REFUSED)
  if not config.HasField('num_classes') or config.num_classes < 1:
    raise ValueError('model.ssd.num_classes must be set to at least 1, got %d'
                     % config.num_classes)
  anchor_generator = anchor_generator_builder.build(config.anchor_generator)
  feature_extractor = build_feature_extractor(
      config.feature_extractor, is_training,
      len(anchor_generator.num_anchors_per_location()),
      freeze_batchnorm=config.freeze_batchnorm)
  config_checks.oneof_choice(
      config.box_predictor, 'box_predictor_oneof', _SSD_PATH + '.box_predictor',
      box_predictor_builder.SINGLE_STAGE_KINDS,
      why=dict.fromkeys(box_predictor_builder.TWO_STAGE_KINDS, _TWO_STAGE_PREDICTOR))
  predictor = box_predictor_builder.build(hyperparams_builder.build, config.box_predictor,
                                          is_training, config.num_classes)
  classification_loss, localization_loss, cls_weight, loc_weight, miner = (
      losses_builder.build(config.loss))
  nms_fn, score_fn = post_processing_builder.build(config.post_processing)
  return ssd_meta_arch.SSDMetaArch(
      is_training=is_training,
      anchor_generator=anchor_generator,
      box_predictor=predictor,
      box_coder=box_coder_builder.build(config.box_coder),
      feature_extractor=feature_extractor,
      matcher=matcher_builder.build(config.matcher),
      image_resizer_fn=image_resizer_builder.build(config.image_resizer),
      non_max_suppression_fn=nms_fn,
      score_conversion_fn=score_fn,
      classification_loss=classification_loss,
      localization_loss=localization_loss,
      classification_loss_weight=cls_weight,
      localization_loss_weight=loc_weight,
      normalize_loss_by_num_matches=config.normalize_loss_by_num_matches,
      hard_example_miner=miner,
      similarity_fn=region_similarity_calculator_builder.build(
          config.similarity_calculator),
      encode_background_as_zeros=config.encode_background_as_zeros,
      negative_class_weight=config.negative_class_weight,
      normalize_loc_loss_by_codesize=config.normalize_loc_loss_by_codesize,
      freeze_batchnorm=config.freeze_batchnorm,
      inplace_batchnorm_update=config.inplace_batchnorm_update,
      add_summaries=add_summaries)


def build_feature_extractor(config, is_training, num_anchor_layers, freeze_batchnorm=False):
  """SsdFeatureExtractor -> an ssd_meta_arch.SSDFeatureExtractor.

  Args:
    config: a ssd_pb2.SsdFeatureExtractor.
    is_training: whether the model is built for training.
    num_anchor_layers: feature maps the anchor generator places anchors on;
      slimtrain's small extractors make that many (the zoo's make their own
      number, `num_layers` when the config sets it).
    freeze_batchnorm: `ssd.freeze_batchnorm`. As in the OD API's slim models,
      it freezes the batch norm of the layers conv_hyperparams does not cover
      (the base network, unless override_base_feature_extractor_hyperparams),
      so those layers are built as for inference; conv_hyperparams layers
      follow `batch_norm.train`.

  Raises:
    ValueError: on an unknown type or a field set that is not built.
  """
  _check_type(config, ssd_pb2.SsdFeatureExtractor, 'feature_extractor_config')
  path = _SSD_PATH + '.feature_extractor'
  config_checks.refuse_unsupported(
      config, path, supported=_FEATURE_EXTRACTOR_FIELDS,
      why={'replace_preprocessor_with_placeholder': 'only the OD API\'s TPU export uses it'})
  extractor_class = feature_extractor_registry.lookup(config.type, path + '.type')
  kwargs = {
      'is_training': is_training and not freeze_batchnorm,
      'depth_multiplier': config.depth_multiplier,
      'min_depth': config.min_depth,
      'pad_to_multiple': config.pad_to_multiple,
      'conv_hyperparams_fn': hyperparams_builder.build(
          config.conv_hyperparams, is_training, path + '.conv_hyperparams'),
      'use_explicit_padding': config.use_explicit_padding,
      'use_depthwise': config.use_depthwise,
      'override_base_feature_extractor_hyperparams':
          config.override_base_feature_extractor_hyperparams,
  }
  if config.HasField('num_layers'):
    kwargs['num_layers'] = config.num_layers
  elif feature_extractor_registry.layers_follow_anchors(config.type):
    kwargs['num_layers'] = num_anchor_layers
  if config.HasField('fpn'):
    kwargs.update(fpn_min_level=config.fpn.min_level, fpn_max_level=config.fpn.max_level,
                  additional_layer_depth=config.fpn.additional_layer_depth)
  return extractor_class(**kwargs)


# The Ssd fields build_ssd builds; the others are refused by name.
_SSD_PATH = 'model.ssd'
_TWO_STAGE_PREDICTOR = ('a two-stage (Faster R-CNN / R-FCN) box predictor; SSDs take '
                        'convolutional_box_predictor or '
                        'weight_shared_convolutional_box_predictor')
_SSD_FIELDS = (
    'num_classes', 'image_resizer', 'feature_extractor', 'box_coder', 'matcher',
    'similarity_calculator', 'encode_background_as_zeros', 'negative_class_weight',
    'box_predictor', 'anchor_generator', 'post_processing', 'normalize_loss_by_num_matches',
    'normalize_loc_loss_by_codesize', 'loss', 'freeze_batchnorm', 'inplace_batchnorm_update',
    'add_background_class')
_SSD_REFUSED = {
    'add_background_class': 'an SSD without a background class is not implemented',
    'explicit_background_class': 'not implemented',
    'use_confidences_as_targets': 'not implemented',
    'implicit_example_weight': 'only with use_confidences_as_targets',
    'return_raw_detections_during_predict': 'not implemented; postprocess returns '
                                            'raw_detection_boxes and raw_detection_scores',
    'mask_head_config': 'SSD mask heads are not implemented',
}
_FEATURE_EXTRACTOR_FIELDS = (
    'type', 'depth_multiplier', 'min_depth', 'conv_hyperparams',
    'override_base_feature_extractor_hyperparams', 'pad_to_multiple', 'use_explicit_padding',
    'use_depthwise', 'fpn', 'num_layers')
