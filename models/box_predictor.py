"""SSD box predictors: box offsets and class logits for every anchor.

An SSD head turns each feature map k (A_k anchors per cell) into two grids of
numbers, [B, H_k, W_k, A_k * box_code_size] box encodings and
[B, H_k, W_k, A_k * class_slots] class logits. `predict` flattens every grid
to [B, H_k * W_k * A_k, ...] and concatenates the maps in the order the
anchor generator lists its anchors, so row m of the result belongs to anchor m.
With `add_background_class` (the default) class column 0 is the background.

Two predictors, laid out exactly as the TF1 Object Detection API's slim
predictors so that zoo checkpoints restore:

* `ConvolutionalBoxPredictor`: an independent head per feature map, under
  `BoxPredictor_k/` (no scope at all when there is one map):
      [Conv2d_i_1x1_D ...]          optional 1x1 layers, depth D
      BoxEncodingPredictor          kernel x kernel conv
      ClassPredictor                kernel x kernel conv (after optional dropout)
  With `use_depthwise` (SSDLite) each of the two predictors becomes a
  `<name>_depthwise` depthwise kernel x kernel conv (normalizer and activation
  from conv_hyperparams, i.e. BatchNorm + relu6 in the zoo) followed by the
  1x1 `<name>` conv.

* `WeightSharedConvolutionalBoxPredictor` (RetinaNet-style, FPN/PPN models):
  one set of conv weights under `WeightSharedConvolutionalBoxPredictor/`
  serves every level, while batch norm keeps per-level statistics:
      [ProjectionLayer/conv2d_k]    only when the maps' depths differ
      BoxPredictionTower/conv2d_i   (+ BatchNorm/feature_k), relu6
      ClassPredictionTower/conv2d_i (+ BatchNorm/feature_k), relu6
      BoxPredictor, ClassPredictor
  With `share_prediction_tower` both heads read one `PredictionTower`.

Convolution hyperparameters (initializer, regularizer, normalizer,
activation) come from `conv_hyperparams_fn()`, a slim arg_scope as built by
builders/hyperparams_builder. Only the two ClassPredictor variables depend on
`num_classes`, so a detection checkpoint trained on another class count
restores everything else.

Usage:

    predictor = box_predictor.ConvolutionalBoxPredictor(
        is_training=True, num_classes=90, conv_hyperparams_fn=hyperparams_fn,
        min_depth=0, max_depth=0, num_layers_before_predictor=0,
        use_dropout=False, dropout_keep_prob=0.8, kernel_size=1, box_code_size=4)
    out = predictor.predict(feature_maps, anchor_generator.num_anchors_per_location())
    out[box_predictor.BOX_ENCODINGS]                      # [B, M, 4]
    out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]  # [B, M, 91]

Kept from the OD API on purpose, though surprising:
  * the kernel is never shrunk to the feature map (SAME padding), so the
    variable shapes do not depend on the image size;
  * `max_depth: 0` means "no extra layers" (depth = min_depth), not "the
    feature map's depth";
  * with `use_depthwise` the ConvolutionalBoxPredictor's 1x1 ClassPredictor
    starts from a zero bias: `class_prediction_bias_init` only reaches the
    full-kernel ClassPredictor (and the weight-shared one).
"""

import tensorflow as tf
import tf_slim as slim

BOX_ENCODINGS = 'box_encodings'
CLASS_PREDICTIONS_WITH_BACKGROUND = 'class_predictions_with_background'

WEIGHT_SHARED_SCOPE = 'WeightSharedConvolutionalBoxPredictor'


def _flatten_grid(grid, slots):
  """[B, H, W, A * slots] -> [B, H * W * A, slots], static M when H, W are known."""
  height, width, channels = grid.shape[1], grid.shape[2], grid.shape[3]
  if height is not None and width is not None:
    return tf.reshape(grid, [-1, height * width * (channels // slots), slots])
  return tf.reshape(grid, [tf.shape(grid)[0], -1, slots])


def _clip(box_grid, box_encodings_clip_range):
  """Clips box encodings to (min, max) (a pair or an object with .min/.max)."""
  if box_encodings_clip_range is None:
    return box_grid
  low = getattr(box_encodings_clip_range, 'min', None)
  high = getattr(box_encodings_clip_range, 'max', None)
  if low is None or high is None:
    low, high = box_encodings_clip_range
  return tf.clip_by_value(box_grid, low, high)


def _check_common_args(num_classes, kernel_size, use_depthwise, conv_hyperparams_fn):
  if num_classes < 1:
    raise ValueError('num_classes must be at least 1, got %s' % num_classes)
  if kernel_size < 1:
    raise ValueError('box_predictor kernel_size must be positive, got %s' % kernel_size)
  if use_depthwise and kernel_size == 1:
    raise ValueError('box_predictor use_depthwise needs kernel_size > 1, got kernel_size 1')
  if not callable(conv_hyperparams_fn):
    raise ValueError('conv_hyperparams_fn must be a callable returning an arg_scope, '
                     'got %r' % (conv_hyperparams_fn,))


class _BoxPredictor:
  """Shared `predict` plumbing: argument checks and concatenation over maps."""

  def __init__(self, is_training, num_classes, add_background_class):
    self._is_training = is_training
    self._num_classes = num_classes
    self._num_class_slots = num_classes + 1 if add_background_class else num_classes

  @property
  def num_classes(self):
    """Classes without background."""
    return self._num_classes

  def predict(self, feature_maps, num_anchors_per_location):
    """Box encodings and class predictions for all anchors of all maps.

    Args:
      feature_maps: list of float [B, H_k, W_k, D_k] tensors, finest first.
      num_anchors_per_location: list of ints A_k, one per feature map.

    Returns:
      {BOX_ENCODINGS: [B, M, box_code_size],
       CLASS_PREDICTIONS_WITH_BACKGROUND: [B, M, class slots]} with
      M = sum_k H_k * W_k * A_k, maps concatenated in the given order.

    Raises:
      ValueError: if the two lists differ in length or are empty.
    """
    if len(feature_maps) != len(num_anchors_per_location):
      raise ValueError('%d feature maps but num_anchors_per_location has %d entries'
                       % (len(feature_maps), len(num_anchors_per_location)))
    if not feature_maps:
      raise ValueError('feature_maps is empty')
    boxes, classes = self._predict_grids(list(feature_maps),
                                         list(num_anchors_per_location))
    return {BOX_ENCODINGS: tf.concat(boxes, axis=1),
            CLASS_PREDICTIONS_WITH_BACKGROUND: tf.concat(classes, axis=1)}

  def _predict_grids(self, feature_maps, num_anchors_per_location):
    """Returns (list of [B, M_k, code], list of [B, M_k, slots]) per map."""
    raise NotImplementedError


class _NoScope:
  """Stands in for a variable scope where the OD API opens none."""

  def __enter__(self):
    return None

  def __exit__(self, *unused_exc_info):
    return False


class ConvolutionalBoxPredictor(_BoxPredictor):
  """An independent convolutional head per feature map (SSD, SSDLite).

  Args:
    is_training: dropout is active when True (batch norm follows conv_hyperparams_fn).
    num_classes: classes without background.
    conv_hyperparams_fn: fn() -> slim arg_scope for the convolutions.
    min_depth: minimum depth of the layers before the predictor.
    max_depth: maximum depth of those layers; the depth used is
      max(min(map depth, max_depth), min_depth) and layers exist only if > 0.
    num_layers_before_predictor: 1x1 conv layers before the two predictors.
    use_dropout: dropout before the ClassPredictor only.
    dropout_keep_prob: dropout keep probability.
    kernel_size: kernel of the predictors (of the depthwise step with use_depthwise).
    box_code_size: numbers per box encoding (4 for FasterRcnnBoxCoder).
    apply_sigmoid_to_scores: return sigmoid(logits) instead of logits.
    add_background_class: add class column 0 for background.
    class_prediction_bias_init: initial bias of the full-kernel ClassPredictor.
    use_depthwise: SSDLite heads (depthwise kernel_size conv, then 1x1).
    box_encodings_clip_range: optional (min, max) for the box encodings.

  Raises:
    ValueError: on num_classes < 1, kernel_size < 1, depthwise with a 1x1
      kernel, or a conv_hyperparams_fn that is not callable.
  """

  def __init__(self, is_training, num_classes, conv_hyperparams_fn, min_depth, max_depth,
               num_layers_before_predictor, use_dropout, dropout_keep_prob, kernel_size,
               box_code_size, apply_sigmoid_to_scores=False, add_background_class=True,
               class_prediction_bias_init=0.0, use_depthwise=False,
               box_encodings_clip_range=None):
    _check_common_args(num_classes, kernel_size, use_depthwise, conv_hyperparams_fn)
    super().__init__(is_training, num_classes, add_background_class)
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._min_depth = min_depth
    self._max_depth = max_depth
    self._num_layers_before_predictor = num_layers_before_predictor
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._kernel_size = kernel_size
    self._box_code_size = box_code_size
    self._apply_sigmoid_to_scores = apply_sigmoid_to_scores
    self._class_prediction_bias_init = class_prediction_bias_init
    self._use_depthwise = use_depthwise
    self._box_encodings_clip_range = box_encodings_clip_range

  def _predict_grids(self, feature_maps, num_anchors_per_location):
    boxes, classes = [], []
    for index, (net, num_anchors) in enumerate(zip(feature_maps, num_anchors_per_location)):
      # Single-map models were trained without the BoxPredictor_0 scope.
      scope = (tf.compat.v1.variable_scope('BoxPredictor_%d' % index)
               if len(feature_maps) > 1 else _NoScope())
      with scope, slim.arg_scope(self._conv_hyperparams_fn()):
        net = self._layers_before_predictor(net)
        boxes.append(self._box_head(net, num_anchors))
        classes.append(self._class_head(net, num_anchors))
    return boxes, classes

  def _layers_before_predictor(self, net):
    depth = max(min(int(net.shape[-1]), self._max_depth), self._min_depth)
    if depth <= 0:
      return net
    for layer in range(self._num_layers_before_predictor):
      net = slim.conv2d(net, depth, [1, 1], scope='Conv2d_%d_1x1_%d' % (layer, depth))
    return net

  def _prediction_conv(self, net, num_outputs, scope, biases_initializer):
    """kernel x kernel linear conv, or (depthwise conv, 1x1 linear conv)."""
    kernel = [self._kernel_size, self._kernel_size]
    linear = dict(activation_fn=None, normalizer_fn=None, normalizer_params=None)
    if not self._use_depthwise:
      return slim.conv2d(net, num_outputs, kernel, scope=scope,
                         biases_initializer=biases_initializer, **linear)
    # The depthwise step keeps the arg_scope's normalizer and activation.
    net = slim.separable_conv2d(net, None, kernel, depth_multiplier=1, padding='SAME',
                                scope=scope + '_depthwise')
    return slim.conv2d(net, num_outputs, [1, 1], scope=scope, **linear)

  def _box_head(self, net, num_anchors):
    grid = self._prediction_conv(net, num_anchors * self._box_code_size,
                                 'BoxEncodingPredictor', tf.compat.v1.zeros_initializer())
    grid = _clip(grid, self._box_encodings_clip_range)
    return _flatten_grid(grid, self._box_code_size)

  def _class_head(self, net, num_anchors):
    if self._use_dropout:
      net = slim.dropout(net, keep_prob=self._dropout_keep_prob,
                         is_training=self._is_training)
    bias = tf.compat.v1.constant_initializer(self._class_prediction_bias_init)
    grid = self._prediction_conv(net, num_anchors * self._num_class_slots,
                                 'ClassPredictor', bias)
    if self._apply_sigmoid_to_scores:
      grid = tf.sigmoid(grid)
    return _flatten_grid(grid, self._num_class_slots)


class WeightSharedConvolutionalBoxPredictor(_BoxPredictor):
  """One convolutional head shared by all feature maps (RetinaNet / FPN / PPN).

  Args:
    is_training: dropout is active when True (batch norm follows conv_hyperparams_fn).
    num_classes: classes without background.
    conv_hyperparams_fn: fn() -> slim arg_scope for the convolutions.
    depth: depth of the tower layers.
    num_layers_before_predictor: tower layers before each predictor.
    box_code_size: numbers per box encoding.
    kernel_size: kernel of the tower layers and of the predictors.
    add_background_class: add class column 0 for background.
    class_prediction_bias_init: initial bias of the ClassPredictor.
    use_dropout: dropout before the ClassPredictor.
    dropout_keep_prob: dropout keep probability.
    share_prediction_tower: one `PredictionTower` for both predictors.
    apply_batch_norm: batch norm (per level) after each tower / projection conv.
    use_depthwise: separable convolutions in towers and predictors.
    score_converter_fn: elementwise fn applied to the class predictions.
    box_encodings_clip_range: optional (min, max) for the box encodings.

  Raises:
    ValueError: on num_classes < 1, kernel_size < 1, depthwise with a 1x1
      kernel, or a conv_hyperparams_fn that is not callable; from `predict`
      when the maps have different numbers of anchors per location.
  """

  def __init__(self, is_training, num_classes, conv_hyperparams_fn, depth,
               num_layers_before_predictor, box_code_size, kernel_size=3,
               add_background_class=True, class_prediction_bias_init=0.0, use_dropout=False,
               dropout_keep_prob=0.8, share_prediction_tower=False, apply_batch_norm=True,
               use_depthwise=False, score_converter_fn=tf.identity,
               box_encodings_clip_range=None):
    _check_common_args(num_classes, kernel_size, use_depthwise, conv_hyperparams_fn)
    super().__init__(is_training, num_classes, add_background_class)
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._depth = depth
    self._num_layers_before_predictor = num_layers_before_predictor
    self._box_code_size = box_code_size
    self._kernel_size = kernel_size
    self._class_prediction_bias_init = class_prediction_bias_init
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._share_prediction_tower = share_prediction_tower
    self._apply_batch_norm = apply_batch_norm
    self._use_depthwise = use_depthwise
    self._score_converter_fn = score_converter_fn
    self._box_encodings_clip_range = box_encodings_clip_range

  def _predict_grids(self, feature_maps, num_anchors_per_location):
    if len(set(num_anchors_per_location)) > 1:
      raise ValueError('WeightSharedConvolutionalBoxPredictor needs the same number of '
                       'anchors at every level, got num_anchors_per_location %s'
                       % (num_anchors_per_location,))
    num_anchors = num_anchors_per_location[0]
    projection_depth = _projection_depth(feature_maps)
    boxes, classes = [], []
    for level, net in enumerate(feature_maps):
      # Reopening the scope with AUTO_REUSE is what shares the weights.
      with (tf.compat.v1.variable_scope(WEIGHT_SHARED_SCOPE, reuse=tf.compat.v1.AUTO_REUSE),
            slim.arg_scope(self._conv_hyperparams_fn())):
        if projection_depth is not None:
          net = self._project(net, projection_depth, level)
        box_features = self._tower(net, self._box_tower_name(), level)
        class_features = (box_features if self._share_prediction_tower
                          else self._tower(net, 'ClassPredictionTower', level))
        boxes.append(self._box_head(box_features, num_anchors))
        classes.append(self._class_head(class_features, num_anchors))
    return boxes, classes

  def _box_tower_name(self):
    return 'PredictionTower' if self._share_prediction_tower else 'BoxPredictionTower'

  def _conv(self, net, num_outputs, kernel_size, scope, **kwargs):
    if self._use_depthwise:
      return slim.separable_conv2d(net, num_outputs, kernel_size, depth_multiplier=1,
                                   padding='SAME', scope=scope, **kwargs)
    return slim.conv2d(net, num_outputs, kernel_size, padding='SAME', scope=scope, **kwargs)

  def _linear_conv_then_batch_norm(self, conv_fn, net, num_outputs, kernel_size, scope,
                                   batch_norm_scope):
    """A linear conv; with apply_batch_norm it has no bias and batch norm follows."""
    if not self._apply_batch_norm:
      return conv_fn(net, num_outputs, kernel_size, scope=scope, activation_fn=None,
                     normalizer_fn=None)
    # Batch norm's beta replaces the conv bias.
    net = conv_fn(net, num_outputs, kernel_size, scope=scope, activation_fn=None,
                  normalizer_fn=None, biases_initializer=None)
    return slim.batch_norm(net, scope=batch_norm_scope)

  def _project(self, net, target_depth, level):
    """1x1 linear projection of level `level` to the common depth (never shared)."""
    scope = 'ProjectionLayer/conv2d_%d' % level
    return self._linear_conv_then_batch_norm(slim.conv2d, net, target_depth, [1, 1],
                                             scope, scope + '/BatchNorm')

  def _tower(self, net, tower_name, level):
    """Shared conv weights; batch norm statistics kept per level."""
    kernel = [self._kernel_size, self._kernel_size]
    for layer in range(self._num_layers_before_predictor):
      scope = '%s/conv2d_%d' % (tower_name, layer)
      net = self._linear_conv_then_batch_norm(
          self._conv, net, self._depth, kernel, scope,
          '%s/BatchNorm/feature_%d' % (scope, level))
      net = tf.nn.relu6(net)
    return net

  def _box_head(self, net, num_anchors):
    kernel = [self._kernel_size, self._kernel_size]
    grid = self._conv(net, num_anchors * self._box_code_size, kernel, 'BoxPredictor',
                      activation_fn=None, normalizer_fn=None,
                      biases_initializer=tf.compat.v1.zeros_initializer())
    grid = _clip(grid, self._box_encodings_clip_range)
    return _flatten_grid(grid, self._box_code_size)

  def _class_head(self, net, num_anchors):
    if self._use_dropout:
      net = slim.dropout(net, keep_prob=self._dropout_keep_prob,
                         is_training=self._is_training)
    kernel = [self._kernel_size, self._kernel_size]
    grid = self._conv(net, num_anchors * self._num_class_slots, kernel, 'ClassPredictor',
                      activation_fn=None, normalizer_fn=None,
                      biases_initializer=tf.compat.v1.constant_initializer(
                          self._class_prediction_bias_init))
    grid = self._score_converter_fn(grid)
    return _flatten_grid(grid, self._num_class_slots)


def _projection_depth(feature_maps):
  """The most common map depth when the maps' depths differ, else None.

  Ties go to the first depth in Python's set order, as in the OD API, so that
  the same maps get the same projection layers.
  """
  depths = [int(net.shape[-1]) for net in feature_maps]
  if len(set(depths)) == 1:
    return None
  return max(set(depths), key=depths.count)
