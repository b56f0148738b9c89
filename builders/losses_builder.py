"""Builds the losses and the hard example miner of a `Loss` proto.

    (classification_loss, localization_loss, classification_weight,
     localization_weight, hard_example_miner) = losses_builder.build(ssd_config.loss)

    classification: weighted_sigmoid (also when unset), weighted_softmax,
                    weighted_sigmoid_focal (RetinaNet's focal loss)
    localization:   weighted_smooth_l1 (also when unset), weighted_l2
    hard_example_miner: core.hard_example_miner.HardExampleMiner

Refused by name: the other classification and localization losses, random
example sampling, equalization loss, expected loss weights and
`anchorwise_output` (an OD API option of the pre-2018 losses).

Differs on purpose from the OD API's `build`: it returns five values, not
seven (no random example sampler, no expected loss weights function).
"""

from builders import config_checks
from core import hard_example_miner as hard_example_miner_lib
from core import losses
from protos import losses_pb2

_UNSUPPORTED_LOSS_OPTIONS = {'anchorwise_output': 'not implemented (per-anchor losses are '
                                                  'always returned unreduced)'}


def build(loss_config, path='model.ssd.loss'):
  """Returns (classification_loss, localization_loss, cls_weight, loc_weight, miner).

  Raises:
    ValueError: on a config of another type or an unsupported loss or option.
  """
  if not isinstance(loss_config, losses_pb2.Loss):
    raise ValueError('loss_config not of type losses_pb2.Loss.')
  config_checks.refuse_unsupported(
      loss_config, path,
      supported=('localization_loss', 'classification_loss', 'hard_example_miner',
                 'classification_weight', 'localization_weight'),
      why={'random_example_sampler': 'random example sampling is not implemented',
           'equalization_loss': 'the equalization loss is not implemented',
           'expected_loss_weights': 'expected loss weights are not implemented',
           'min_num_negative_samples': 'only with expected_loss_weights',
           'desired_negative_sampling_ratio': 'only with expected_loss_weights'})
  classification_loss = build_classification_loss(loss_config.classification_loss,
                                                  path + '.classification_loss')
  localization_loss = build_localization_loss(loss_config.localization_loss,
                                              path + '.localization_loss')
  miner = None
  if loss_config.HasField('hard_example_miner'):
    miner = build_hard_example_miner(loss_config.hard_example_miner,
                                     loss_config.classification_weight,
                                     loss_config.localization_weight,
                                     path + '.hard_example_miner')
  return (classification_loss, localization_loss, loss_config.classification_weight,
          loss_config.localization_weight, miner)


def build_classification_loss(config, path='classification_loss'):
  """A core.losses classification loss of a ClassificationLoss proto."""
  if not isinstance(config, losses_pb2.ClassificationLoss):
    raise ValueError('loss_config not of type losses_pb2.ClassificationLoss.')
  kind = config_checks.oneof_choice(
      config, 'classification_loss', path,
      ('weighted_sigmoid', 'weighted_softmax', 'weighted_sigmoid_focal'))
  if kind is None:
    return losses.WeightedSigmoidClassificationLoss()
  options = getattr(config, kind)
  config_checks.refuse_unsupported(options, '%s.%s' % (path, kind),
                                   supported=('gamma', 'alpha', 'logit_scale'),
                                   why=_UNSUPPORTED_LOSS_OPTIONS)
  if kind == 'weighted_softmax':
    return losses.WeightedSoftmaxClassificationLoss(logit_scale=options.logit_scale)
  if kind == 'weighted_sigmoid_focal':
    return losses.SigmoidFocalClassificationLoss(
        gamma=options.gamma, alpha=options.alpha if options.HasField('alpha') else None)
  return losses.WeightedSigmoidClassificationLoss()


def build_faster_rcnn_classification_loss(config,
                                          path='second_stage_classification_loss'):
  """The second stage's classification loss: softmax when unset, as the OD API's.

  weighted_sigmoid, weighted_softmax and weighted_sigmoid_focal are built;
  `anchorwise_output: true` is accepted (our losses are always per anchor).
  """
  if not isinstance(config, losses_pb2.ClassificationLoss):
    raise ValueError('loss_config not of type losses_pb2.ClassificationLoss.')
  kind = config_checks.oneof_choice(
      config, 'classification_loss', path,
      ('weighted_sigmoid', 'weighted_softmax', 'weighted_sigmoid_focal'))
  if kind is None:
    return losses.WeightedSoftmaxClassificationLoss()
  options = getattr(config, kind)
  if options.HasField('anchorwise_output') and not options.anchorwise_output:
    raise ValueError('%s.%s.anchorwise_output: false is set, but slimtrain does not build '
                     'it: the losses are always returned per anchor' % (path, kind))
  return build_classification_loss(_without_anchorwise_output(config), path)


def _without_anchorwise_output(config):
  """A copy of a ClassificationLoss with the (accepted) anchorwise_output cleared."""
  copy = losses_pb2.ClassificationLoss()
  copy.CopyFrom(config)
  options = getattr(copy, copy.WhichOneof('classification_loss'))
  if options.DESCRIPTOR.fields_by_name.get('anchorwise_output') is not None:
    options.ClearField('anchorwise_output')
  return copy


def build_localization_loss(config, path='localization_loss'):
  """A core.losses localization loss of a LocalizationLoss proto."""
  if not isinstance(config, losses_pb2.LocalizationLoss):
    raise ValueError('loss_config not of type losses_pb2.LocalizationLoss.')
  kind = config_checks.oneof_choice(config, 'localization_loss', path,
                                    ('weighted_smooth_l1', 'weighted_l2'))
  if kind is None:
    return losses.WeightedSmoothL1LocalizationLoss()
  options = getattr(config, kind)
  config_checks.refuse_unsupported(options, '%s.%s' % (path, kind), supported=('delta',),
                                   why=_UNSUPPORTED_LOSS_OPTIONS)
  if kind == 'weighted_l2':
    return losses.WeightedL2LocalizationLoss()
  return losses.WeightedSmoothL1LocalizationLoss(delta=options.delta)


def build_hard_example_miner(config, classification_weight, localization_weight,
                             path='hard_example_miner'):
  """A core.hard_example_miner.HardExampleMiner of a HardExampleMiner proto."""
  if not isinstance(config, losses_pb2.HardExampleMiner):
    raise ValueError('hard_example_miner_config not of type losses_pb2.HardExampleMiner.')
  if config.num_hard_examples < 0:
    raise ValueError('%s.num_hard_examples must not be negative, got %d'
                     % (path, config.num_hard_examples))
  loss_type = {
      losses_pb2.HardExampleMiner.BOTH: 'both',
      losses_pb2.HardExampleMiner.CLASSIFICATION: 'cls',
      losses_pb2.HardExampleMiner.LOCALIZATION: 'loc',
  }[config.loss_type]
  return hard_example_miner_lib.HardExampleMiner(
      num_hard_examples=config.num_hard_examples or None,
      iou_threshold=config.iou_threshold,
      loss_type=loss_type,
      cls_loss_weight=classification_weight,
      loc_loss_weight=localization_weight,
      max_negatives_per_positive=config.max_negatives_per_positive or None,
      min_negatives_per_image=config.min_negatives_per_image)
