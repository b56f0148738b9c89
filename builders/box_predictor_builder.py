"""Builds a box predictor from a `BoxPredictor` proto.

    convolutional_box_predictor               -> ConvolutionalBoxPredictor
                                                 (also when unset; ssdlite with
                                                 use_depthwise)
    weight_shared_convolutional_box_predictor -> WeightSharedConvolutionalBoxPredictor
                                                 (RetinaNet / FPN configs)
    mask_rcnn_box_predictor                   -> MaskRCNNBoxPredictor (the second
                                                 stage of Faster / Mask R-CNN)
    rfcn_box_predictor                        -> RfcnBoxPredictor (R-FCN)

Each takes its layers' hyperparameters from its own `conv_hyperparams` (and
`fc_hyperparams` for the Mask R-CNN box and class layers). The SSD builder
accepts only the first two, the Faster R-CNN builder only the last two.

    predictor = box_predictor_builder.build(hyperparams_builder.build,
                                            ssd_config.box_predictor,
                                            is_training=True, num_classes=90)
"""

import tensorflow as tf

from builders import config_checks
from builders import hyperparams_builder
from models import box_predictor as box_predictor_lib
from models import rfcn_box_predictor
from models import two_stage_box_predictors
from protos import box_predictor_pb2

SINGLE_STAGE_KINDS = ('convolutional_box_predictor', 'weight_shared_convolutional_box_predictor')
TWO_STAGE_KINDS = ('mask_rcnn_box_predictor', 'rfcn_box_predictor')


def build(argscope_fn, box_predictor_config, is_training, num_classes,
          add_background_class=True, path='model.ssd.box_predictor'):
  """Returns the box predictor `box_predictor_config` describes.

  Args:
    argscope_fn: fn(hyperparams_config, is_training) -> fn() -> arg_scope
      (builders.hyperparams_builder.build).
    box_predictor_config: a box_predictor_pb2.BoxPredictor.
    is_training: whether the model is built for training.
    num_classes: classes without background.
    add_background_class: predict a background column in front.
    path: the block's place in the pipeline config, for error messages.

  Raises:
    ValueError: on a config of another type, an unsupported predictor or
      option, or bad depths (named).
  """
  if not isinstance(box_predictor_config, box_predictor_pb2.BoxPredictor):
    raise ValueError('box_predictor_config not of type box_predictor_pb2.BoxPredictor.')
  kind = config_checks.oneof_choice(box_predictor_config, 'box_predictor_oneof', path,
                                    SINGLE_STAGE_KINDS + TWO_STAGE_KINDS)
  if kind == 'mask_rcnn_box_predictor':
    return _build_mask_rcnn(argscope_fn, box_predictor_config.mask_rcnn_box_predictor,
                            is_training, num_classes, path + '.' + kind)
  if kind == 'rfcn_box_predictor':
    return _build_rfcn(argscope_fn, box_predictor_config.rfcn_box_predictor, is_training,
                       num_classes, path + '.' + kind)
  if kind == 'weight_shared_convolutional_box_predictor':
    return _build_weight_shared(argscope_fn, box_predictor_config.
                                weight_shared_convolutional_box_predictor, is_training,
                                num_classes, add_background_class, path + '.' + kind)
  return _build_convolutional(argscope_fn, box_predictor_config.convolutional_box_predictor,
                              is_training, num_classes, add_background_class,
                              path + '.convolutional_box_predictor')


def _build_convolutional(argscope_fn, config, is_training, num_classes,
                         add_background_class, path):
  config_checks.refuse_unsupported(
      config, path, supported=(
          'conv_hyperparams', 'min_depth', 'max_depth', 'num_layers_before_predictor',
          'use_dropout', 'dropout_keep_probability', 'kernel_size', 'box_code_size',
          'apply_sigmoid_to_scores', 'class_prediction_bias_init', 'use_depthwise',
          'box_encodings_clip_range'))
  if config.max_depth and config.min_depth > config.max_depth:
    raise ValueError('%s.min_depth (%d) exceeds max_depth (%d)'
                     % (path, config.min_depth, config.max_depth))
  return box_predictor_lib.ConvolutionalBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      conv_hyperparams_fn=_arg_scope_fn(argscope_fn, config, 'conv_hyperparams', is_training, path),
      min_depth=config.min_depth,
      max_depth=config.max_depth,
      num_layers_before_predictor=config.num_layers_before_predictor,
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      kernel_size=config.kernel_size,
      box_code_size=config.box_code_size,
      apply_sigmoid_to_scores=config.apply_sigmoid_to_scores,
      add_background_class=add_background_class,
      class_prediction_bias_init=config.class_prediction_bias_init,
      use_depthwise=config.use_depthwise,
      box_encodings_clip_range=_clip_range(config))


def _build_weight_shared(argscope_fn, config, is_training, num_classes,
                         add_background_class, path):
  if config.depth < 1:
    raise ValueError('%s.depth must be set to a positive depth, got %d' % (path, config.depth))
  score_converter = box_predictor_pb2.WeightSharedConvolutionalBoxPredictor
  score_converter_fn = (tf.sigmoid if config.score_converter == score_converter.SIGMOID
                        else tf.identity)
  return box_predictor_lib.WeightSharedConvolutionalBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      conv_hyperparams_fn=_arg_scope_fn(argscope_fn, config, 'conv_hyperparams', is_training, path),
      depth=config.depth,
      num_layers_before_predictor=config.num_layers_before_predictor,
      box_code_size=config.box_code_size,
      kernel_size=config.kernel_size,
      add_background_class=add_background_class,
      class_prediction_bias_init=config.class_prediction_bias_init,
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      share_prediction_tower=config.share_prediction_tower,
      apply_batch_norm=config.conv_hyperparams.HasField('batch_norm'),
      use_depthwise=config.use_depthwise,
      score_converter_fn=score_converter_fn,
      box_encodings_clip_range=_clip_range(config))


def _build_mask_rcnn(argscope_fn, config, is_training, num_classes, path):
  config_checks.refuse_unsupported(
      config, path, supported=(
          'fc_hyperparams', 'use_dropout', 'dropout_keep_probability', 'box_code_size',
          'conv_hyperparams', 'predict_instance_masks', 'mask_prediction_conv_depth',
          'mask_height', 'mask_width', 'mask_prediction_num_conv_layers',
          'masks_are_class_agnostic', 'share_box_across_classes',
          'convolve_then_upsample_masks'),
      why={'predict_keypoints': 'keypoint heads of the second stage are not implemented'})
  if not config.HasField('fc_hyperparams'):
    raise ValueError('%s.fc_hyperparams must be set (the box and class layers are fully '
                     'connected)' % path)
  if config.predict_instance_masks and not config.HasField('conv_hyperparams'):
    raise ValueError('%s.conv_hyperparams must be set when predict_instance_masks is true '
                     '(the mask head is convolutional)' % path)
  if not 0.0 < config.dropout_keep_probability <= 1.0:
    raise ValueError('%s.dropout_keep_probability must be in (0, 1], got %s'
                     % (path, config.dropout_keep_probability))
  conv_hyperparams_fn = None
  if config.HasField('conv_hyperparams'):
    conv_hyperparams_fn = _arg_scope_fn(argscope_fn, config, 'conv_hyperparams', is_training, path)
  return two_stage_box_predictors.MaskRCNNBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      fc_hyperparams_fn=_arg_scope_fn(argscope_fn, config, 'fc_hyperparams', is_training, path),
      use_dropout=config.use_dropout,
      dropout_keep_prob=config.dropout_keep_probability,
      box_code_size=config.box_code_size,
      conv_hyperparams_fn=conv_hyperparams_fn,
      predict_instance_masks=config.predict_instance_masks,
      mask_height=config.mask_height,
      mask_width=config.mask_width,
      mask_prediction_num_conv_layers=config.mask_prediction_num_conv_layers,
      mask_prediction_conv_depth=config.mask_prediction_conv_depth,
      masks_are_class_agnostic=config.masks_are_class_agnostic,
      share_box_across_classes=config.share_box_across_classes,
      convolve_then_upsample_masks=config.convolve_then_upsample_masks)


def _build_rfcn(argscope_fn, config, is_training, num_classes, path):
  for field in ('num_spatial_bins_height', 'num_spatial_bins_width', 'depth', 'crop_height',
                'crop_width', 'box_code_size'):
    if getattr(config, field) < 1:
      raise ValueError('%s.%s must be positive, got %d' % (path, field, getattr(config, field)))
  return rfcn_box_predictor.RfcnBoxPredictor(
      is_training=is_training,
      num_classes=num_classes,
      conv_hyperparams_fn=_arg_scope_fn(argscope_fn, config, 'conv_hyperparams', is_training, path),
      num_spatial_bins=[config.num_spatial_bins_height, config.num_spatial_bins_width],
      depth=config.depth,
      crop_size=[config.crop_height, config.crop_width],
      box_code_size=config.box_code_size)


def _arg_scope_fn(argscope_fn, config, field, is_training, path):
  """argscope_fn on `config.<field>`; our hyperparams builder also gets the field's path.

  A user's argscope_fn takes the OD API's two arguments; slimtrain's own
  (hyperparams_builder.build) names the offending field in its errors.
  """
  if argscope_fn is hyperparams_builder.build:
    return argscope_fn(getattr(config, field), is_training, '%s.%s' % (path, field))
  return argscope_fn(getattr(config, field), is_training)


def _clip_range(config):
  """(min, max) of a predictor's box_encodings_clip_range, or None when unset."""
  if not config.HasField('box_encodings_clip_range'):
    return None
  return (config.box_encodings_clip_range.min, config.box_encodings_clip_range.max)
