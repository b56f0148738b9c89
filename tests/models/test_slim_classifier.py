"""Tests of models/slim_classifier.py: small_cnn trains end to end; every
tf_slim net builds its graph; restore maps, trainable scopes, loss options."""

import numpy as np
import tensorflow as tf
import tf_slim as slim

from core import standard_fields as fields
from models import slim_classifier

tf.compat.v1.disable_eager_execution()


def colour_batch(num_images, size=16, seed=0):
  """Class k images are noisy and dominated by colour channel k."""
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, 3, num_images)
  images = rng.uniform(0, 80, [num_images, size, size, 3]).astype(np.float32)
  for i, label in enumerate(labels):
    images[i, :, :, label] += 150
  return images, labels


class SmallCnnTest(tf.test.TestCase):

  def test_trains(self):
    images_np, labels_np = colour_batch(48)
    with tf.Graph().as_default():
      tf.compat.v1.set_random_seed(0)
      model = slim_classifier.SlimClassifier(True, 3, net='small_cnn', image_height=16,
                                             image_width=16, dropout_keep_prob=1.0)
      images, shapes = model.preprocess(tf.constant(images_np))
      model.provide_groundtruth(tf.constant(labels_np))
      predictions = model.predict(images, shapes)
      loss_dict = model.loss(predictions, shapes)
      accuracy = model.accuracy(predictions)
      self.assertEqual(list(loss_dict), ['Loss/classification_loss'])
      self.assertEqual(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES),
                       [loss_dict['Loss/classification_loss']])
      self.assertTrue(model.regularization_losses())
      total = tf.compat.v1.losses.get_total_loss()
      train_op = tf.compat.v1.train.MomentumOptimizer(0.05, 0.9).minimize(total)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        first = sess.run(loss_dict)['Loss/classification_loss']
        for _ in range(40):
          sess.run(train_op)
        last, acc = sess.run([loss_dict['Loss/classification_loss'], accuracy])
    self.assertLess(last, 0.3 * first)
    self.assertGreater(acc, 0.9)

  def test_preprocess_postprocess_and_top_k(self):
    with tf.Graph().as_default():
      model = slim_classifier.SlimClassifier(False, 4, image_height=8, image_width=12)
      images, shapes = model.preprocess(tf.fill([2, 20, 20, 3], 255.0))
      logits = tf.constant([[4.0, 3.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
      predictions = {fields.ClassificationResultFields.logits: logits}
      post = model.postprocess(predictions)
      model.provide_groundtruth(tf.constant([1, 3]))
      top1, top2 = model.accuracy(predictions, 1), model.accuracy(predictions, 2)
      with tf.compat.v1.Session() as sess:
        out = sess.run([images, shapes, post, top1, top2])
    self.assertEqual(out[0].shape, (2, 8, 12, 3))
    self.assertAllClose(out[0].max(), 1.0)
    self.assertAllEqual(out[1], [[8, 12, 3], [8, 12, 3]])
    self.assertAllEqual(out[2]['classes'], [0, 3])
    self.assertAllClose(out[2]['probabilities'].sum(axis=1), [1.0, 1.0])
    self.assertAllClose([out[3], out[4]], [0.5, 1.0])

  def test_label_smoothing_and_one_hot_labels(self):
    values = []
    with tf.Graph().as_default():
      logits = tf.constant([[10.0, 0.0, 0.0]])
      for smoothing in (0.0, 0.3):
        model = slim_classifier.SlimClassifier(True, 3, label_smoothing=smoothing,
                                               add_loss_to_collection=False)
        model.provide_groundtruth(tf.constant([[1.0, 0.0, 0.0]]))
        values.append(model.loss({'logits': logits})['Loss/classification_loss'])
      self.assertEqual(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES), [])
      with tf.compat.v1.Session() as sess:
        plain, smoothed = sess.run(values)
    self.assertLess(plain, 1e-3)
    self.assertGreater(smoothed, 1.0)

  def test_restore_map_and_trainable_scopes(self):
    with tf.Graph().as_default():
      model = slim_classifier.SlimClassifier(
          True, 5, net='small_cnn', image_height=16, image_width=16,
          checkpoint_exclude_scopes=['SmallCNN/Logits'],
          trainable_scopes=['SmallCNN/conv3', 'SmallCNN/Logits'])
      images, _ = model.preprocess(tf.zeros([1, 16, 16, 3]))
      model.predict(images)
      tf.compat.v1.train.get_or_create_global_step()
      restore = model.restore_map()
      trainable = sorted(v.op.name for v in tf.compat.v1.trainable_variables())
      self.assertEqual(sorted(v.op.name for v in model.variables_to_train()), trainable)
      self.assertIn('global_step', model.restore_map('full'))
    self.assertIn('SmallCNN/conv1/weights', restore)
    self.assertFalse([k for k in restore if k.startswith('SmallCNN/Logits')])
    self.assertEqual(trainable, ['SmallCNN/Logits/Conv2d_1x1/biases',
                                 'SmallCNN/Logits/Conv2d_1x1/weights',
                                 'SmallCNN/conv3/biases', 'SmallCNN/conv3/weights'])
    with self.assertRaisesRegex(ValueError, 'fine_tune_checkpoint_type'):
      model.restore_map('detection')

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, 'slim_classifier.net'):
      slim_classifier.SlimClassifier(True, 3, net='alexnet')
    with self.assertRaisesRegex(ValueError, 'num_classes'):
      slim_classifier.SlimClassifier(True, 1)
    with self.assertRaisesRegex(ValueError, 'vgg_16 needs'):
      slim_classifier.SlimClassifier(True, 3, net='vgg_16', image_height=64, image_width=64)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(RuntimeError, 'Groundtruth'):
        slim_classifier.SlimClassifier(True, 3).loss({'logits': tf.zeros([1, 3])})


class SlimNetsGraphTest(tf.test.TestCase):
  """Builds (never runs) each tf_slim net at the smallest input it accepts."""

  NETS = [('resnet_v1_50', 64, 'resnet_v1_50/logits'),
          ('resnet_v1_101', 64, 'resnet_v1_101/logits'),
          ('resnet_v2_50', 64, 'resnet_v2_50/logits'),
          ('inception_v3', 80, 'InceptionV3/Logits'),
          ('vgg_16', 224, 'vgg_16/fc8'),
          ('small_mobilenet_v1', 32, 'SmallMobilenetV1/Logits'),
          ('small_resnet', 32, 'SmallResnet/Logits')]

  def test_graph_construction(self):
    for net, size, logits_scope in self.NETS:
      with self.subTest(net=net), tf.Graph().as_default():
        model = slim_classifier.SlimClassifier(
            True, 7, net=net, image_height=size, image_width=size,
            checkpoint_exclude_scopes=[logits_scope])
        images, shapes = model.preprocess(tf.compat.v1.placeholder(tf.float32, [2, 40, 40, 3]))
        predictions = model.predict(images, shapes)
        model.provide_groundtruth(tf.constant([0, 6]))
        model.loss(predictions)
        self.assertEqual(predictions['logits'].shape.as_list(), [2, 7])
        restore = model.restore_map()
        model_vars = slim.get_model_variables()
        excluded = [v for v in model_vars if v.op.name.startswith(logits_scope + '/')]
        self.assertTrue(excluded, net)
        self.assertEqual(len(restore), len(model_vars) - len(excluded))
        self.assertTrue(all(k.startswith(model.scope + '/') for k in restore), net)
        self.assertTrue(model.updates() or net == 'vgg_16', net)
        self.assertTrue(model.regularization_losses(), net)


if __name__ == '__main__':
  tf.test.main()
