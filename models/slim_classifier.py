"""An image classifier over tf_slim.nets (and slimtrain's small backbones).

`SlimClassifier` wraps one architecture behind the ClassificationModel
interface the trainer, evaluator and exporter drive:

    preprocess   resize to the net's input size, scale [0, 255] -> [-1, 1]
    predict      {'logits': [B, num_classes]}, the final layer sized for
                 num_classes (so an ImageNet checkpoint minus its logits
                 layer fine-tunes onto any class count)
    postprocess  {'classes': [B] int64, 'probabilities': [B, num_classes]}
    loss         {'Loss/classification_loss': softmax cross-entropy with
                 optional label smoothing}; also added to the
                 tf.compat.v1.losses collection (see `loss`)
    accuracy     fraction of the batch whose label is in the top k

Nets: resnet_v1_50, resnet_v1_101, resnet_v2_50, inception_v3, vgg_16 (the
tf_slim.nets definitions, variable names as in the public slim checkpoints),
small_cnn, and the SSD backbones small_mobilenet_v1 / small_resnet (so a
classifier checkpoint can seed an SSD's feature extractor). Weight decay comes
from slim L2 regularizers (REGULARIZATION_LOSSES).

Fine-tuning: `restore_map()` maps every model variable outside
`checkpoint_exclude_scopes` by name; `trainable_scopes` makes every variable
outside those scopes non-trainable when it is created.

    classifier = slim_classifier.SlimClassifier(
        is_training=True, num_classes=5, net='resnet_v1_50',
        checkpoint_exclude_scopes=['resnet_v1_50/logits'],
        trainable_scopes=['resnet_v1_50/block4', 'resnet_v1_50/logits'])
    images, shapes = classifier.preprocess(raw_images)
    classifier.provide_groundtruth(labels)          # int [B] or one-hot
    predictions = classifier.predict(images, shapes)
    losses = classifier.loss(predictions)
"""

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v3
from tf_slim.nets import resnet_utils
from tf_slim.nets import resnet_v1
from tf_slim.nets import resnet_v2
from tf_slim.nets import vgg

from core import model
from core import standard_fields as fields
from models import backbones

CLASSIFICATION_LOSS = 'Loss/classification_loss'


def _resnet(net_fn):
  def build(images, num_classes, is_training, params):
    with slim.arg_scope(resnet_utils.resnet_arg_scope(
        weight_decay=params['weight_decay'], batch_norm_decay=params['batch_norm_decay'])):
      logits, _ = net_fn(images, num_classes=num_classes, is_training=is_training,
                         global_pool=True)
    return logits
  return build


def _inception_v3(images, num_classes, is_training, params):
  with slim.arg_scope(inception_v3.inception_v3_arg_scope(
      weight_decay=params['weight_decay'], batch_norm_decay=params['batch_norm_decay'])):
    logits, _ = inception_v3.inception_v3(
        images, num_classes=num_classes, is_training=is_training,
        dropout_keep_prob=params['dropout_keep_prob'], create_aux_logits=False)
  return logits


def _vgg_16(images, num_classes, is_training, params):
  with slim.arg_scope(vgg.vgg_arg_scope(weight_decay=params['weight_decay'])):
    logits, _ = vgg.vgg_16(images, num_classes=num_classes, is_training=is_training,
                           dropout_keep_prob=params['dropout_keep_prob'],
                           spatial_squeeze=False)
  return logits


def _small_net(name):
  base_fn, scope = backbones.BASES[name]

  def build(images, num_classes, is_training, params):
    with slim.arg_scope(backbones.arg_scope(
        is_training, weight_decay=params['weight_decay'],
        use_batch_norm=name != 'small_cnn', batch_norm_decay=params['batch_norm_decay'],
        activation_fn=tf.nn.relu)):
      net, _ = base_fn(images, depth_multiplier=params['depth_multiplier'],
                       min_depth=params['min_depth'], scope=scope)
      with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope('Logits'):
          net = tf.reduce_mean(net, axis=[1, 2], keepdims=True, name='global_pool')
          net = slim.dropout(net, keep_prob=params['dropout_keep_prob'], scope='Dropout')
          logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                               normalizer_fn=None, normalizer_params=None,
                               biases_initializer=tf.compat.v1.zeros_initializer(),
                               scope='Conv2d_1x1')
    return logits
  return build


# net name -> (fn(images, num_classes, is_training, params) -> logits,
#              variable scope, smallest input side that builds).
NETS = {
    'resnet_v1_50': (_resnet(resnet_v1.resnet_v1_50), 'resnet_v1_50', 32),
    'resnet_v1_101': (_resnet(resnet_v1.resnet_v1_101), 'resnet_v1_101', 32),
    'resnet_v2_50': (_resnet(resnet_v2.resnet_v2_50), 'resnet_v2_50', 32),
    'inception_v3': (_inception_v3, 'InceptionV3', 75),
    'vgg_16': (_vgg_16, 'vgg_16', 224),
    'small_cnn': (_small_net('small_cnn'), backbones.SMALL_CNN_SCOPE, 8),
    'small_mobilenet_v1': (_small_net('small_mobilenet_v1'), backbones.MOBILENET_SCOPE, 32),
    'small_resnet': (_small_net('small_resnet'), backbones.RESNET_SCOPE, 32),
}


def _under_any_scope(name, scopes):
  return any(name == s.rstrip('/') or name.startswith(s.rstrip('/') + '/') for s in scopes)


class SlimClassifier(model.ClassificationModel):
  """ClassificationModel over one tf_slim.nets architecture.

  Args:
    is_training: whether dropout and batch norm train.
    num_classes: number of classes (the final layer's width).
    net: a key of NETS.
    image_height: input height the net sees.
    image_width: input width the net sees.
    weight_decay: L2 weight regularization.
    label_smoothing: softmax cross-entropy label smoothing.
    dropout_keep_prob: dropout keep probability (nets that have dropout).
    checkpoint_exclude_scopes: scopes `restore_map` leaves out.
    trainable_scopes: when non-empty, only variables under these are trainable.
    depth_multiplier: width of the small nets.
    min_depth: minimum layer depth of the small nets.
    batch_norm_decay: batch-norm moving-average decay.
    add_summaries: add histograms of the logits.
    add_loss_to_collection: `loss` also adds its loss to the
      tf.compat.v1.losses collection (GraphKeys.LOSSES).

  Raises:
    ValueError: on an unknown net, num_classes < 2 or an input smaller than
      the net supports.
  """

  def __init__(self, is_training, num_classes, net='small_cnn', image_height=224,
               image_width=224, weight_decay=4e-5, label_smoothing=0.0,
               dropout_keep_prob=0.8, checkpoint_exclude_scopes=(), trainable_scopes=(),
               depth_multiplier=1.0, min_depth=8, batch_norm_decay=0.99, add_summaries=True,
               add_loss_to_collection=True):
    if net not in NETS:
      raise ValueError('slim_classifier.net must be one of %s, got %r' % (sorted(NETS), net))
    if num_classes is None or num_classes < 2:
      raise ValueError('slim_classifier.num_classes must be at least 2, got %r'
                       % (num_classes,))
    min_side = NETS[net][2]
    if min(image_height, image_width) < min_side:
      raise ValueError('%s needs image_height and image_width of at least %d, got %dx%d'
                       % (net, min_side, image_height, image_width))
    if not 0.0 <= label_smoothing < 1.0:
      raise ValueError('slim_classifier.label_smoothing must be in [0, 1), got %s'
                       % label_smoothing)
    super().__init__(num_classes)
    self._is_training = is_training
    self._net = net
    self._image_height = image_height
    self._image_width = image_width
    self._label_smoothing = label_smoothing
    self._checkpoint_exclude_scopes = list(checkpoint_exclude_scopes)
    self._trainable_scopes = list(trainable_scopes)
    self._add_summaries = add_summaries
    self._add_loss_to_collection = add_loss_to_collection
    self._params = {
        'weight_decay': weight_decay,
        'dropout_keep_prob': dropout_keep_prob,
        'depth_multiplier': depth_multiplier,
        'min_depth': min_depth,
        'batch_norm_decay': batch_norm_decay,
    }

  @property
  def net(self):
    return self._net

  @property
  def scope(self):
    """The net's top-level variable scope (e.g. 'resnet_v1_50')."""
    return NETS[self._net][1]

  def preprocess(self, inputs):
    """Resizes to (image_height, image_width) and maps [0, 255] to [-1, 1].

    Returns:
      (preprocessed_inputs [B, h, w, 3], true_image_shapes int32 [B, 3]).

    Raises:
      ValueError: if inputs is not rank 4.
    """
    if inputs.shape.ndims != 4:
      raise ValueError('preprocess expects [batch, height, width, channels], got %s'
                       % inputs.shape)
    with tf.compat.v1.name_scope('Preprocessor'):
      resized = tf.image.resize(tf.cast(inputs, tf.float32),
                                [self._image_height, self._image_width])
      preprocessed = (2.0 / 255.0) * resized - 1.0
      shapes = tf.tile([[self._image_height, self._image_width, 3]],
                       [tf.shape(inputs)[0], 1])
      return preprocessed, tf.cast(shapes, tf.int32)

  def _trainable_getter(self, getter, name, *args, **kwargs):
    """Creates variables outside trainable_scopes as non-trainable."""
    if not _under_any_scope(name, self._trainable_scopes):
      kwargs['trainable'] = False
    return getter(name, *args, **kwargs)

  def predict(self, preprocessed_inputs, true_image_shapes=None):
    """Returns {'logits': float [B, num_classes]}."""
    del true_image_shapes
    net_fn = NETS[self._net][0]
    custom_getter = self._trainable_getter if self._trainable_scopes else None
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                     custom_getter=custom_getter):
      logits = net_fn(preprocessed_inputs, self.num_classes, self._is_training, self._params)
    if logits.shape.ndims == 4:
      logits = tf.reduce_mean(logits, axis=[1, 2])
    logits = tf.identity(logits, name='logits')
    if self._add_summaries:
      tf.compat.v1.summary.histogram('logits', logits)
    return {fields.ClassificationResultFields.logits: logits}

  def postprocess(self, prediction_dict, true_image_shapes=None):
    """Returns {'classes': int64 [B], 'probabilities': float [B, num_classes]}."""
    del true_image_shapes
    logits = prediction_dict[fields.ClassificationResultFields.logits]
    with tf.compat.v1.name_scope('Postprocessor'):
      probabilities = tf.nn.softmax(logits, name='probabilities')
      classes = tf.argmax(logits, axis=1, name='classes')
    return {fields.ClassificationResultFields.classes: classes,
            fields.ClassificationResultFields.probabilities: probabilities}

  def _one_hot_labels(self):
    labels = tf.convert_to_tensor(self.groundtruth_labels())
    if labels.shape.ndims == 2:
      return tf.cast(labels, tf.float32)
    return tf.one_hot(tf.cast(tf.reshape(labels, [-1]), tf.int32), self.num_classes)

  def loss(self, prediction_dict, true_image_shapes=None):
    """Softmax cross-entropy against the labels given to `provide_groundtruth`.

    With add_loss_to_collection (the default) the loss is also in
    GraphKeys.LOSSES, so callers that add the returned values to that
    collection themselves must skip tensors already there.

    Returns:
      {'Loss/classification_loss': scalar}.
    """
    del true_image_shapes
    logits = prediction_dict[fields.ClassificationResultFields.logits]
    with tf.compat.v1.name_scope('Loss'):
      loss = tf.compat.v1.losses.softmax_cross_entropy(
          self._one_hot_labels(), logits, label_smoothing=self._label_smoothing,
          loss_collection=(tf.compat.v1.GraphKeys.LOSSES if self._add_loss_to_collection
                           else None),
          scope='classification_loss')
    return {CLASSIFICATION_LOSS: loss}

  def accuracy(self, prediction_dict, top_k=1):
    """Returns the float fraction of the batch with the label in the top_k logits."""
    logits = prediction_dict[fields.ClassificationResultFields.logits]
    labels = tf.convert_to_tensor(self.groundtruth_labels())
    if labels.shape.ndims == 2:
      labels = tf.argmax(labels, axis=1)
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
    with tf.compat.v1.name_scope('Accuracy'):
      in_top_k = tf.nn.in_top_k(predictions=logits, targets=labels, k=top_k)
      return tf.reduce_mean(tf.cast(in_top_k, tf.float32), name='top_%d' % top_k)

  def variables_to_train(self):
    """Trainable variables under trainable_scopes (all trainable ones if unset)."""
    variables = tf.compat.v1.trainable_variables()
    if not self._trainable_scopes:
      return variables
    return [v for v in variables if _under_any_scope(v.op.name, self._trainable_scopes)]

  def restore_map(self, fine_tune_checkpoint_type='classification',
                  load_all_detection_checkpoint_vars=False):
    """Returns {checkpoint name: variable} for the net's model variables.

    Variables under checkpoint_exclude_scopes (e.g. the logits layer when the
    class count changes) are left out. Reads the default graph, so any
    SlimClassifier object can be asked after the graph is built.

    Args:
      fine_tune_checkpoint_type: 'classification' (model variables) or
        'full' (every global variable, e.g. to resume with optimizer slots).
      load_all_detection_checkpoint_vars: unused (detection checkpoints do
        not apply to classifiers).

    Raises:
      ValueError: on any other checkpoint type.
    """
    del load_all_detection_checkpoint_vars
    if fine_tune_checkpoint_type == 'classification':
      variables = slim.get_model_variables()
    elif fine_tune_checkpoint_type == 'full':
      variables = tf.compat.v1.global_variables()
    else:
      raise ValueError("a classifier restores fine_tune_checkpoint_type 'classification' "
                       "or 'full', got %r" % (fine_tune_checkpoint_type,))
    return {v.op.name: v for v in variables
            if not _under_any_scope(v.op.name, self._checkpoint_exclude_scopes)}
