"""Faster R-CNN's NASNet-A large backbone: `FasterRCNNNASFeatureExtractor` (type faster_rcnn_nas).

NASNet-A large (models/nasnet.py) is cut before its second reduction:

    first stage  (per image):    conv0, cell_stem_0/1, cell_0..5,
                                 reduction_cell_0, cell_6..11       stride 16
    second stage (per proposal): reduction_cell_1, cell_12..17, relu

A NASNet cell reads the outputs of the two cells before it, so the first
stage hands both on: its feature map is cell_10's and cell_11's outputs
concatenated (2 x 2016 = 4032 channels), the RPN slides over all of it, and
the second stage splits each cropped proposal back into the two halves
(cell_10's first) and continues the stack from reduction_cell_1. A 17x17
crop gives 9x9x4032 box classifier features.

Variables keep slim's NASNet names under the stage scopes, e.g.
`FirstStageFeatureExtractor/cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights`
and `SecondStageFeatureExtractor/cell_17/prev_1x1/weights`, as in the zoo's
faster_rcnn_nas checkpoint.

`NasNetFamilyFeatureExtractor` holds what does not depend on the cells (the
hand-over between the stages, preprocessing, checkpoint names); PNASNet-5
(models/faster_rcnn_pnas_feature_extractor.py) shares it.

Usage:

    extractor = FasterRCNNNASFeatureExtractor(is_training=True,
                                              first_stage_features_stride=16)
    images = extractor.preprocess(resized_images)      # [0, 255] -> [-1, 1]
    rpn_features, endpoints = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')   # [B, H/16, W/16, 4032]
    box_features = extractor.extract_box_classifier_features(
        crops, scope='SecondStageFeatureExtractor')   # crops [N, 17, 17, 4032]

Behaviour kept from the OD API (which trained the zoo model this way):

* In training, drop path is on in both stages (keep probability 0.7 for
  the last cell, scheduled on depth and on the global step over 250k steps);
  a graph without a global step gets one from the first cell
  ('FirstStageFeatureExtractor/cell_stem_0/comb_iter_0/left/global_step').
* Batch norm in the first stage follows `is_training` (slim's NASNet builder
  sets it, overriding the detector's frozen-batch-norm setting); in the
  second stage it follows `batch_norm_trainable and is_training`.
* The L2 weight decay is NASNet's 5e-5 whatever `weight_decay` says.
* Images need a static height and width (a fixed_shape_resizer).
"""

import tensorflow as tf
import tf_slim as slim

from models import faster_rcnn_feature_extractor
from models import nasnet

_STRIDE = 16


class NasNetFamilyFeatureExtractor(faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """What the NASNet and PNASNet extractors share: the cut, the split, the names.

  A subclass sets `_TYPE` (its feature_extractor.type), `_LAST_FIRST_STAGE_CELL`
  (the number of the last cell of the first stage), and builds its two halves
  in `_first_stage_cells(images)` -> endpoints and
  `_second_stage_cells(hidden_previous, hidden)` -> features.

  Args:
    is_training: whether the detector trains (drop path, first-stage batch norm).
    first_stage_features_stride: must be 16.
    batch_norm_trainable: whether the second stage's batch norm trains.
    reuse_weights: reuse for the first stage's layers.
    weight_decay: accepted for the common signature; the backbone's own
      weight decay applies.

  Raises:
    ValueError: if first_stage_features_stride is not 16.
  """

  _TYPE = None
  _LAST_FIRST_STAGE_CELL = None

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0):
    if first_stage_features_stride != _STRIDE:
      raise ValueError('first_stage_features_stride must be %d for %s, got %r'
                       % (_STRIDE, self._TYPE, first_stage_features_stride))
    super().__init__(is_training, first_stage_features_stride, batch_norm_trainable,
                     reuse_weights, weight_decay)

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixel values to [-1, 1]."""
    return resized_inputs * (2.0 / 255.0) - 1.0

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """The first stage; its feature map is its last two cells concatenated.

    Returns:
      (float [B, H', W', D], {'Stem', 'Cell_<n>', ...: tensor}).

    Raises:
      ValueError: if preprocessed_inputs is not [B, H, W, C] with static H and W.
    """
    del scope  # The base class has opened it.
    shape = preprocessed_inputs.shape
    if shape.rank != 4 or shape[1] is None or shape[2] is None:
      raise ValueError('preprocessed_inputs: expected [batch, height, width, channels] with '
                       'a static height and width (use a fixed_shape_resizer), got %s' % shape)
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d, slim.batch_norm],
                        reuse=self._reuse_weights):
      endpoints = self._first_stage_cells(preprocessed_inputs)
    last = self._LAST_FIRST_STAGE_CELL
    rpn_feature_map = tf.concat(
        [endpoints['Cell_%d' % (last - 1)], endpoints['Cell_%d' % last]], axis=3)
    # Drop path's per-example mask loses the static batch size; restore it.
    rpn_feature_map.set_shape([shape[0]] + rpn_feature_map.shape.as_list()[1:])
    return rpn_feature_map, endpoints

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """The second stage on each crop, then a relu.

    Args:
      proposal_feature_maps: float [N, h, w, D] (the cropped first-stage map).

    Returns:
      float [N, ceil(h / 2), ceil(w / 2), D'].
    """
    del scope
    depth = proposal_feature_maps.shape[3]
    if depth is None or depth % 2:
      raise ValueError('proposal_feature_maps: expected an even, static depth (two cell '
                       'outputs concatenated), got shape %s' % proposal_feature_maps.shape)
    # The first stage concatenated (second-to-last cell, last cell): the two
    # states the second stage's first cell reads.
    hidden_previous, hidden = tf.split(proposal_feature_maps, 2, axis=3)
    net = self._second_stage_cells(hidden_previous, hidden)
    with tf.compat.v1.variable_scope('final_layer'):
      return tf.nn.relu(net)

  def _first_stage_cells(self, images):
    raise NotImplementedError

  def _second_stage_cells(self, hidden_previous, hidden):
    raise NotImplementedError

  def restore_from_classification_checkpoint_fn(self, first_stage_feature_extractor_scope,
                                                second_stage_feature_extractor_scope):
    """Maps slim's (P)NASNet checkpoint names to this extractor's variables.

    Those checkpoints keep only the exponential moving averages of their
    variables, unscoped: the variable
    'FirstStageFeatureExtractor/cell_0/1x1/weights' reads
    'cell_0/1x1/weights/ExponentialMovingAverage'.

    Returns:
      {checkpoint name: variable} for every global variable under the two scopes.
    """
    names = {}
    for variable in tf.compat.v1.global_variables():
      for scope_name in (first_stage_feature_extractor_scope,
                         second_stage_feature_extractor_scope):
        prefix = scope_name + '/'
        if variable.op.name.startswith(prefix):
          names[variable.op.name[len(prefix):] + '/ExponentialMovingAverage'] = variable
    return names


class FasterRCNNNASFeatureExtractor(NasNetFamilyFeatureExtractor):
  """Faster R-CNN feature extractor over NASNet-A large (see the module docstring)."""

  _TYPE = 'faster_rcnn_nas'
  _LAST_FIRST_STAGE_CELL = 11

  def _first_stage_cells(self, images):
    """Stem and cells 0..11 (reduction_cell_0 before cell 6)."""
    config = nasnet.LARGE
    normal_cell, reduction_cell = nasnet.make_cells(config, self._is_training)
    with slim.arg_scope(nasnet.large_arg_scope(batch_norm_training=self._is_training)):
      net, cell_outputs = nasnet.build_stem(images, config, reduction_cell)
      _, endpoints = nasnet.stack_cells(net, cell_outputs, config, normal_cell,
                                        reduction_cell, 0, self._LAST_FIRST_STAGE_CELL + 1)
    endpoints['Stem'] = net
    return endpoints

  def _second_stage_cells(self, hidden_previous, hidden):
    """reduction_cell_1 and cells 12..17."""
    config = nasnet.LARGE
    normal_cell, reduction_cell = nasnet.make_cells(config, self._is_training)
    with slim.arg_scope(nasnet.large_arg_scope(batch_norm_training=self._train_batch_norm)):
      net, _ = nasnet.stack_cells(hidden, [None, hidden_previous, hidden], config,
                                  normal_cell, reduction_cell,
                                  self._LAST_FIRST_STAGE_CELL + 1, config.num_cells)
    return net
