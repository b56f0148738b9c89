"""Convolutional box predictor: box offsets and class logits per anchor.

For each feature map k with A_k anchors per cell, the predictor runs
`num_layers_before_predictor` optional convolutions, then two parallel
convolutions with `kernel_size` kernels:

    BoxPredictor_k/BoxEncodingPredictor   -> [B, H, W, A_k * 4]
    BoxPredictor_k/ClassPredictor         -> [B, H, W, A_k * (num_classes + 1)]

which are reshaped to [B, H * W * A_k, ...] and concatenated over the maps, in
the order the anchor generator lists its anchors. Column 0 of the class
predictions is the background class. Only `ClassPredictor` depends on
`num_classes`, so a detection checkpoint trained on another class count
restores everything but those two variables.

Usage:

    predictor = box_predictor.ConvolutionalBoxPredictor(is_training=True,
                                                        num_classes=3, kernel_size=3)
    out = predictor.predict(feature_maps, anchor_generator.num_anchors_per_location())
    out['box_encodings']                         # [B, M, 4]
    out['class_predictions_with_background']     # [B, M, 4]
"""

import tensorflow as tf
import tf_slim as slim

BOX_ENCODINGS = 'box_encodings'
CLASS_PREDICTIONS_WITH_BACKGROUND = 'class_predictions_with_background'


class ConvolutionalBoxPredictor:
  """Predicts box encodings and class logits with convolutions per feature map.

  Args:
    is_training: dropout and batch norm train when True.
    num_classes: classes without background.
    min_depth: minimum depth of the layers before the predictor.
    max_depth: maximum depth of those layers (0: the feature map's depth).
    num_layers_before_predictor: extra 1x1 conv layers before the heads.
    use_dropout: dropout before the heads.
    dropout_keep_prob: dropout keep probability.
    kernel_size: kernel of the prediction convolutions (clamped to the map).
    box_code_size: numbers per box encoding (4).
    class_prediction_bias_init: initial bias of the class logits.
    weight_decay: L2 regularization of the weights.
    use_batch_norm: batch norm in the layers before the predictor.
    batch_norm_decay: batch-norm moving-average decay.

  Raises:
    ValueError: if num_classes < 1 or kernel_size < 1.
  """

  def __init__(self, is_training, num_classes, min_depth=0, max_depth=0,
               num_layers_before_predictor=0, use_dropout=False, dropout_keep_prob=0.8,
               kernel_size=1, box_code_size=4, class_prediction_bias_init=0.0,
               weight_decay=4e-5, use_batch_norm=False, batch_norm_decay=0.99):
    if num_classes < 1:
      raise ValueError('num_classes must be at least 1, got %s' % num_classes)
    if kernel_size < 1:
      raise ValueError('box_predictor kernel_size must be positive, got %s' % kernel_size)
    self._is_training = is_training
    self._num_classes = num_classes
    self._min_depth = min_depth
    self._max_depth = max_depth
    self._num_layers_before_predictor = num_layers_before_predictor
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._kernel_size = kernel_size
    self._box_code_size = box_code_size
    self._class_prediction_bias_init = class_prediction_bias_init
    self._weight_decay = weight_decay
    self._use_batch_norm = use_batch_norm
    self._batch_norm_decay = batch_norm_decay

  @property
  def num_classes(self):
    return self._num_classes

  def _arg_scope(self):
    regularizer = (slim.l2_regularizer(self._weight_decay) if self._weight_decay > 0
                   else None)
    bn_params = {'is_training': self._is_training, 'decay': self._batch_norm_decay,
                 'epsilon': 0.001, 'center': True, 'scale': True}
    return slim.arg_scope(
        [slim.conv2d],
        weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.03),
        weights_regularizer=regularizer,
        activation_fn=tf.nn.relu6,
        normalizer_fn=slim.batch_norm if self._use_batch_norm else None,
        normalizer_params=bn_params if self._use_batch_norm else None,
        padding='SAME')

  def predict(self, feature_maps, num_anchors_per_location):
    """Returns {box_encodings [B, M, 4], class_predictions_with_background [B, M, K+1]}.

    Args:
      feature_maps: list of float [B, H_k, W_k, D_k] tensors (static H, W).
      num_anchors_per_location: list of ints, one per feature map.

    Raises:
      ValueError: if the two lists differ in length.
    """
    if len(feature_maps) != len(num_anchors_per_location):
      raise ValueError('%d feature maps but num_anchors_per_location has %d entries'
                       % (len(feature_maps), len(num_anchors_per_location)))
    box_list, class_list = [], []
    with self._arg_scope():
      for index, (net, num_anchors) in enumerate(zip(feature_maps, num_anchors_per_location)):
        with tf.compat.v1.variable_scope('BoxPredictor_%d' % index, values=[net]):
          box, cls = self._predict_one(net, num_anchors)
        box_list.append(box)
        class_list.append(cls)
    return {BOX_ENCODINGS: tf.concat(box_list, axis=1),
            CLASS_PREDICTIONS_WITH_BACKGROUND: tf.concat(class_list, axis=1)}

  def _predict_one(self, net, num_anchors):
    depth = int(net.shape[-1])
    if self._max_depth:
      depth = min(depth, self._max_depth)
    depth = max(depth, self._min_depth)
    for layer in range(self._num_layers_before_predictor):
      net = slim.conv2d(net, depth, [1, 1], scope='Conv2d_%d_1x1_%d' % (layer, depth))
    height, width = int(net.shape[1]), int(net.shape[2])
    kernel = [min(self._kernel_size, height), min(self._kernel_size, width)]
    box = slim.conv2d(net, num_anchors * self._box_code_size, kernel, activation_fn=None,
                      normalizer_fn=None, normalizer_params=None,
                      scope='BoxEncodingPredictor')
    if self._use_dropout:
      net = slim.dropout(net, keep_prob=self._dropout_keep_prob,
                         is_training=self._is_training)
    num_class_slots = self._num_classes + 1
    cls = slim.conv2d(net, num_anchors * num_class_slots, kernel, activation_fn=None,
                      normalizer_fn=None, normalizer_params=None,
                      biases_initializer=tf.compat.v1.constant_initializer(
                          self._class_prediction_bias_init),
                      scope='ClassPredictor')
    num_boxes = height * width * num_anchors
    box = tf.reshape(box, [-1, num_boxes, self._box_code_size])
    cls = tf.reshape(cls, [-1, num_boxes, num_class_slots])
    return box, cls
