"""A tiny Faster R-CNN for the meta-architecture tests: a two-conv extractor and its model.

`build_model` assembles a FasterRCNNMetaArch from the real anchor generator,
samplers, target assigners, box predictor and NMS around `TinyExtractor`
(stride 8, a few channels), so sessions on 64..96 px images stay small; the
R-FCN tests reuse the extractor and the arg scopes.

    model = faster_rcnn_testlib.build_model(is_training=True, masks=True)
    images, shapes = model.preprocess(tf.constant(faster_rcnn_testlib.image_batch()))
    faster_rcnn_testlib.provide_one_box_each(model, masks=True)
"""

import functools

import numpy as np
import tensorflow as tf
import tf_slim as slim

from core import balanced_positive_negative_sampler as sampler_lib
from core import grid_anchor_generator
from core import losses
from core import post_processing
from models import faster_rcnn_feature_extractor
from models import faster_rcnn_meta_arch as meta_arch
from models import two_stage_box_predictors
from models import two_stage_ops

NUM_CLASSES = 3
MAX_PROPOSALS = 20
MAX_DETECTIONS = 10
MASK_SIZE = 8


class TinyExtractor(faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """Stride-8 first stage (two convs), one conv second stage."""

  def __init__(self, is_training, first_stage_features_stride=8, depth=16, box_depth=24,
               zoo_like=False):
    super().__init__(is_training, first_stage_features_stride)
    self._depth = depth
    self._box_depth = box_depth
    self._zoo_like = zoo_like

  def preprocess(self, resized_inputs):
    return resized_inputs / 127.5 - 1.0

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    if self._zoo_like:  # Zoo depths without zoo compute: pool, then one 1x1 conv.
      net = slim.avg_pool2d(preprocessed_inputs, [16, 16], stride=16, padding='SAME')
      return slim.conv2d(net, self._depth, [1, 1], scope='conv'), {}
    net = slim.conv2d(preprocessed_inputs, 8, [3, 3], stride=2, scope='conv1')
    return slim.conv2d(net, self._depth, [3, 3], stride=4, scope='conv2'), {}

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    kernel = [1, 1] if self._zoo_like else [3, 3]
    return slim.conv2d(proposal_feature_maps, self._box_depth, kernel, scope='conv3')


def conv_arg_scope():
  with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                      weights_initializer=tf.compat.v1.truncated_normal_initializer(
                          stddev=0.05)) as scope:
    return scope


def fc_arg_scope():
  with slim.arg_scope([slim.fully_connected],
                      weights_initializer=tf.compat.v1.truncated_normal_initializer(
                          stddev=0.05)) as scope:
    return scope


def build_model(is_training, number_of_stages=2, masks=False, num_classes=NUM_CLASSES,
                extractor=None, box_predictor=None, hard_example_miner=None,
                second_stage_batch_size=8, anchor_scales=(0.5, 1.0, 2.0), stride=8,
                mask_kwargs=None, **kwargs):
  """A FasterRCNNMetaArch on the tiny extractor (options as the constructor's)."""
  if box_predictor is None:
    box_predictor = two_stage_box_predictors.MaskRCNNBoxPredictor(
        is_training=is_training, num_classes=num_classes, fc_hyperparams_fn=fc_arg_scope,
        use_dropout=False, dropout_keep_prob=1.0, box_code_size=4,
        conv_hyperparams_fn=conv_arg_scope, predict_instance_masks=masks,
        **(mask_kwargs or dict(mask_height=MASK_SIZE, mask_width=MASK_SIZE,
                               mask_prediction_conv_depth=8)))
  arguments = dict(
      is_training=is_training, num_classes=num_classes,
      image_resizer_fn=lambda images: (images, tf.tile(
          tf.shape(images)[None, 1:], [tf.shape(images)[0], 1])),
      feature_extractor=extractor or TinyExtractor(is_training),
      number_of_stages=number_of_stages,
      first_stage_anchor_generator=grid_anchor_generator.GridAnchorGenerator(
          scales=anchor_scales, aspect_ratios=(0.5, 1.0, 2.0), base_anchor_size=[32, 32],
          anchor_stride=[stride, stride]),
      first_stage_target_assigner=meta_arch.create_faster_rcnn_target_assigner('proposal'),
      first_stage_atrous_rate=1, first_stage_box_predictor_arg_scope_fn=conv_arg_scope,
      first_stage_box_predictor_kernel_size=3, first_stage_box_predictor_depth=12,
      first_stage_minibatch_size=32,
      first_stage_sampler=sampler_lib.BalancedPositiveNegativeSampler(0.5),
      first_stage_non_max_suppression_fn=functools.partial(
          post_processing.batch_multiclass_non_max_suppression, score_thresh=0.0,
          iou_thresh=0.7, max_size_per_class=MAX_PROPOSALS, max_total_size=MAX_PROPOSALS),
      first_stage_max_proposals=MAX_PROPOSALS, first_stage_localization_loss_weight=2.0,
      first_stage_objectness_loss_weight=1.0,
      crop_and_resize_fn=two_stage_ops.native_crop_and_resize, initial_crop_size=6,
      maxpool_kernel_size=2, maxpool_stride=2,
      second_stage_target_assigner=meta_arch.create_faster_rcnn_target_assigner(
          'detection'),
      second_stage_mask_rcnn_box_predictor=box_predictor,
      second_stage_batch_size=second_stage_batch_size,
      second_stage_sampler=sampler_lib.BalancedPositiveNegativeSampler(0.25),
      second_stage_non_max_suppression_fn=functools.partial(
          post_processing.batch_multiclass_non_max_suppression, score_thresh=0.0,
          iou_thresh=0.6, max_size_per_class=5, max_total_size=MAX_DETECTIONS),
      second_stage_score_conversion_fn=tf.nn.softmax,
      second_stage_localization_loss_weight=2.0,
      second_stage_classification_loss_weight=1.0,
      second_stage_classification_loss=losses.WeightedSoftmaxClassificationLoss(),
      hard_example_miner=hard_example_miner)
  arguments.update(kwargs)
  return meta_arch.FasterRCNNMetaArch(**arguments)


def image_batch(batch=1, height=64, width=64, seed=0):
  return np.random.RandomState(seed).uniform(0, 255, (batch, height, width, 3)).astype(
      np.float32)


def provide_one_box_each(model, batch=1, masks=False, size=64):
  boxes = [tf.constant([[0.25, 0.25, 0.75, 0.7]])] * batch
  classes = [tf.one_hot([1], model.num_classes)] * batch
  mask_list = None
  if masks:
    mask = np.zeros((1, size, size), np.float32)
    mask[0, size // 4:3 * size // 4, size // 4:int(0.7 * size)] = 1.0
    mask_list = [tf.constant(mask)] * batch
  model.provide_groundtruth(boxes, classes, groundtruth_masks_list=mask_list)


def run(fetches, feed_dict=None):
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(fetches, feed_dict)


def train_graph(model, images, masks=False):
  """Preprocess, one groundtruth box (and mask) per image, predict and loss.

  Returns:
    (prediction dict, loss dict, true_image_shapes).
  """
  preprocessed, shapes = model.preprocess(tf.constant(images))
  provide_one_box_each(model, batch=images.shape[0], masks=masks, size=images.shape[1])
  predictions = model.predict(preprocessed, shapes)
  return predictions, model.loss(predictions, shapes), shapes
