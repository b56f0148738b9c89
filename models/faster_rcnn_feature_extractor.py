"""What a two-stage detector needs from its backbone: `FasterRCNNFeatureExtractor`.

A Faster R-CNN (or R-FCN, Mask R-CNN) backbone is cut in two. The first part
runs once per image and yields the feature map the region proposal network
(RPN) slides over; the second part runs once per proposal, on the feature map
cropped to that proposal (crop-and-resize, then max-pool), and yields the
features the second-stage box classifier reads. For a ResNet the cut is after
block3; block4 becomes the per-proposal head.

The meta-architecture calls the two halves inside the scopes
'FirstStageFeatureExtractor' and 'SecondStageFeatureExtractor'; a subclass
opens its backbone's own scope inside them, so a ResNet-50 extractor creates
`FirstStageFeatureExtractor/resnet_v1_50/block1/...` and
`SecondStageFeatureExtractor/resnet_v1_50/block4/...`, the names in the OD
API's zoo checkpoints.

    extractor = SomeResnetExtractor(is_training=True, first_stage_features_stride=16)
    images = extractor.preprocess(resized_images)
    rpn_features, endpoints = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')
    ...crop rpn_features to each proposal...
    box_features = extractor.extract_box_classifier_features(
        cropped, scope='SecondStageFeatureExtractor')

The constructor and method names are the OD API's (TF1, slim), so an extractor
written for it drops in.
"""

import abc

import tensorflow as tf


class FasterRCNNFeatureExtractor(abc.ABC):
  """Base class of the two-stage detectors' feature extractors.

  Args:
    is_training: whether the network trains (dropout; batch norm only when
      `batch_norm_trainable` too).
    first_stage_features_stride: output stride of the first-stage feature map
      (e.g. 16, or 8 for an atrous backbone).
    batch_norm_trainable: whether batch norm statistics and parameters train.
      Two-stage models train with one image per clone, too few for batch
      statistics, so the OD API keeps them frozen unless told otherwise.
    reuse_weights: passed to the backbone's variable scope.
    weight_decay: L2 regularization of the backbone's weights.
  """

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0):
    self._is_training = is_training
    self._first_stage_features_stride = first_stage_features_stride
    self._train_batch_norm = batch_norm_trainable and is_training
    self._reuse_weights = reuse_weights
    self._weight_decay = weight_decay

  @property
  def is_keras_model(self):
    return False

  @abc.abstractmethod
  def preprocess(self, resized_inputs):
    """Maps resized images (float, [0, 255]) to the backbone's input range."""

  def extract_proposal_features(self, preprocessed_inputs, scope):
    """Runs the first half of the backbone.

    Args:
      preprocessed_inputs: float [B, H, W, 3].
      scope: the variable scope to build in ('FirstStageFeatureExtractor').

    Returns:
      (rpn_feature_map [B, H', W', D], {endpoint name: tensor}).
    """
    with tf.compat.v1.variable_scope(scope, values=[preprocessed_inputs]):
      return self._extract_proposal_features(preprocessed_inputs, scope)

  @abc.abstractmethod
  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """Subclass part of `extract_proposal_features` (already inside `scope`)."""

  def extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Runs the second half of the backbone on every cropped proposal.

    Args:
      proposal_feature_maps: float [B * max_proposals, crop_h, crop_w, D].
      scope: the variable scope to build in ('SecondStageFeatureExtractor').

    Returns:
      float [B * max_proposals, h, w, D'] box classifier features.
    """
    with tf.compat.v1.variable_scope(scope, values=[proposal_feature_maps],
                                     reuse=tf.compat.v1.AUTO_REUSE):
      return self._extract_box_classifier_features(proposal_feature_maps, scope)

  @abc.abstractmethod
  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Subclass part of `extract_box_classifier_features` (inside `scope`)."""

  def restore_from_classification_checkpoint_fn(self, first_stage_feature_extractor_scope,
                                                second_stage_feature_extractor_scope):
    """Maps classification-checkpoint names to this extractor's variables.

    A classification checkpoint of the backbone (e.g. slim's resnet_v1_50)
    names its variables without the two stage scopes; both halves restore
    from it.

    Args:
      first_stage_feature_extractor_scope: e.g. 'FirstStageFeatureExtractor'.
      second_stage_feature_extractor_scope: e.g. 'SecondStageFeatureExtractor'.

    Returns:
      {checkpoint name: variable} for every global variable under the two scopes.
    """
    names = {}
    for variable in tf.compat.v1.global_variables():
      for scope_name in (first_stage_feature_extractor_scope,
                         second_stage_feature_extractor_scope):
        prefix = scope_name + '/'
        if variable.op.name.startswith(prefix):
          names[variable.op.name[len(prefix):]] = variable
    return names
