"""Faster R-CNN feature extractor over Inception-ResNet-v2 (type faster_rcnn_inception_resnet_v2).

The backbone (models/inception_resnet_v2.py) is cut after the 17x17 residual
blocks ('PreAuxLogits', 1088 channels):

  * first stage, once per image: the stem up to PreAuxLogits with SAME
    padding everywhere (`align_feature_maps=True`), at output stride 16, or 8
    with the block17 run dilated (the zoo's "atrous" models);
  * second stage, once per proposal (crops of e.g. 17x17x1088): Mixed_7a with
    VALID padding (17 -> 8), the 9 block8 blocks with ReLU, the last Block8
    without activation, and Conv2d_7b_1x1 (1536 channels).

Both halves build inside 'InceptionResnetV2', so the variables are e.g.
`FirstStageFeatureExtractor/InceptionResnetV2/Repeat_1/block17_20/...` and
`SecondStageFeatureExtractor/InceptionResnetV2/Repeat/block8_9/...`, as in the
OD API's zoo checkpoints. Batch norm is frozen (inference mode, no update ops)
unless both `is_training` and `batch_norm_trainable`.

    extractor = FasterRCNNInceptionResnetV2FeatureExtractor(
        is_training=True, first_stage_features_stride=8)
    images = extractor.preprocess(resized_images)               # [-1, 1]
    rpn_features, _ = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')             # [B, H/8, W/8, 1088]
    box_features = extractor.extract_box_classifier_features(
        crops_17x17, scope='SecondStageFeatureExtractor')       # [N, 8, 8, 1536]

Restoring from slim's classification checkpoint: the second stage's block8
run is 'Repeat' here but 'Repeat_2' in the checkpoint (the whole net has
three runs), so `restore_from_classification_checkpoint_fn` renames it.
"""

import tensorflow as tf
import tf_slim as slim

from models import faster_rcnn_feature_extractor
from models import inception_resnet_v2

_SCOPE = inception_resnet_v2.DEFAULT_SCOPE
# The second stage's block8 run and its name in the full classification net.
_SECOND_STAGE_REPEAT = 'Repeat'
_CHECKPOINT_REPEAT = 'Repeat_2'


class FasterRCNNInceptionResnetV2FeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """Inception-ResNet-v2 split at PreAuxLogits for Faster R-CNN.

  Args: see FasterRCNNFeatureExtractor.

  Raises:
    ValueError: if `first_stage_features_stride` is not 8 or 16.
  """

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0):
    if first_stage_features_stride not in (8, 16):
      raise ValueError('first_stage_features_stride must be 8 or 16 for '
                       'faster_rcnn_inception_resnet_v2, got %r'
                       % (first_stage_features_stride,))
    super().__init__(is_training, first_stage_features_stride, batch_norm_trainable,
                     reuse_weights, weight_decay)

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixels to [-1, 1], the range the slim checkpoint expects."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _arg_scope(self):
    """The backbone's arg_scope with batch norm in (usually frozen) inference mode."""
    with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope(
        weight_decay=self._weight_decay)):
      with slim.arg_scope([slim.batch_norm], is_training=self._train_batch_norm) as scope:
        return scope

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """The trunk up to PreAuxLogits, SAME-padded, at the first-stage stride.

    Args:
      preprocessed_inputs: float [B, H, W, 3] in [-1, 1].
      scope: the enclosing scope's name (unused; already entered).

    Returns:
      ([B, ceil(H / stride), ceil(W / stride), 1088], {end point: tensor}).

    Raises:
      ValueError: if `preprocessed_inputs` is not 4-D.
    """
    del scope
    if preprocessed_inputs.shape.rank != 4:
      raise ValueError('preprocessed_inputs must be [batch, height, width, channels], '
                       'got shape %s' % preprocessed_inputs.shape)
    with slim.arg_scope(self._arg_scope()):
      with tf.compat.v1.variable_scope(_SCOPE, reuse=self._reuse_weights) as backbone:
        return inception_resnet_v2.inception_resnet_v2_base(
            preprocessed_inputs, final_endpoint='PreAuxLogits',
            output_stride=self._first_stage_features_stride, align_feature_maps=True,
            scope=backbone)

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Mixed_7a (VALID), the block8 blocks and Conv2d_7b_1x1 on each crop.

    Args:
      proposal_feature_maps: float [N, crop, crop, 1088] (crop 17 -> 8x8 out).
      scope: the enclosing scope's name (unused; already entered).

    Returns:
      float [N, (crop - 3) // 2 + 1, same, 1536].
    """
    del scope
    with tf.compat.v1.variable_scope(_SCOPE, reuse=self._reuse_weights):
      with slim.arg_scope(self._arg_scope()):
        with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1,
                            padding='SAME'):
          net = inception_resnet_v2.mixed_7a(proposal_feature_maps, padding='VALID')
          return inception_resnet_v2.block8_tail(net, repeat_scope=_SECOND_STAGE_REPEAT)

  def restore_from_classification_checkpoint_fn(self, first_stage_feature_extractor_scope,
                                                second_stage_feature_extractor_scope):
    """{slim checkpoint name: variable} for both stages.

    Both stage scopes are stripped (as the base class does), and the second
    stage's `InceptionResnetV2/Repeat/...` becomes `InceptionResnetV2/Repeat_2/...`,
    its name in the classification net.
    """
    stripped = super().restore_from_classification_checkpoint_fn(
        first_stage_feature_extractor_scope, second_stage_feature_extractor_scope)
    second_stage_run = '%s/%s/%s/' % (second_stage_feature_extractor_scope, _SCOPE,
                                      _SECOND_STAGE_REPEAT)
    renamed = '%s/%s/' % (_SCOPE, _CHECKPOINT_REPEAT)
    names = {}
    for name, variable in stripped.items():
      if variable.op.name.startswith(second_stage_run):
        name = renamed + variable.op.name[len(second_stage_run):]
      names[name] = variable
    return names
