"""An MNIST-like classifier written the way tf.estimator users write model_fns.

Shared by the tests in tests/estimator: generated data (10 classes, 8x8 grey
"images" around class prototypes, deterministic per seed), `input_fn`s
returning Datasets, a `model_fn` with a mode-conditional optimizer,
`eval_metric_ops` and `export_outputs`, and a serving receiver with a raw
float placeholder.

    est = tfe.Estimator(mnist_testlib.model_fn, model_dir=d,
                        params={'learning_rate': 0.1})
    est.train(mnist_testlib.train_input_fn(batch_size=32), max_steps=50)
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

from trainer import estimator as tfe

NUM_CLASSES = 10
IMAGE_SIZE = 8
DEFAULT_PARAMS = {'learning_rate': 0.1, 'hidden_units': 16, 'optimizer': 'sgd'}


def make_data(num_examples, seed=0):
  """Returns (images float32 [n, 8, 8], labels int32 [n]) around class prototypes."""
  prototypes = np.random.RandomState(1234).uniform(0, 1, (NUM_CLASSES, IMAGE_SIZE, IMAGE_SIZE))
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, NUM_CLASSES, num_examples).astype(np.int32)
  images = prototypes[labels] + rng.normal(0, 0.3, (num_examples, IMAGE_SIZE, IMAGE_SIZE))
  return images.astype(np.float32), labels


def train_input_fn(batch_size=32, num_examples=512, seed=0, shuffle=True):
  """An input_fn repeating the training data forever in batches."""
  images, labels = make_data(num_examples, seed)

  def input_fn(params):
    del params  # Declared to show the Estimator passes it only when asked.
    ds = tf.data.Dataset.from_tensor_slices(({'images': images}, labels))
    if shuffle:
      ds = ds.shuffle(num_examples, seed=seed)
    return ds.repeat().batch(batch_size, drop_remainder=True)
  return input_fn


def eval_input_fn(batch_size=64, num_examples=256, seed=1):
  """An input_fn going once over evaluation data."""
  images, labels = make_data(num_examples, seed)

  def input_fn():
    return tf.data.Dataset.from_tensor_slices(({'images': images}, labels)).batch(batch_size)
  return input_fn


def predict_input_fn(images, batch_size=16):
  """An input_fn of features only, once over `images`."""
  def input_fn():
    return tf.data.Dataset.from_tensor_slices({'images': images}).batch(batch_size)
  return input_fn


def serving_input_receiver_fn():
  """Raw float images fed to the 'images' input of the SavedModel."""
  images = tf.compat.v1.placeholder(tf.float32, [None, IMAGE_SIZE, IMAGE_SIZE], name='images')
  return tfe.export.ServingInputReceiver({'images': images}, {'images': images})


def _optimizer(params):
  if params['optimizer'] == 'adam':
    return tf.compat.v1.train.AdamOptimizer(params['learning_rate'])
  if params['optimizer'] == 'momentum':
    return tf.compat.v1.train.MomentumOptimizer(params['learning_rate'], 0.9)
  return tf.compat.v1.train.GradientDescentOptimizer(params['learning_rate'])


def model_fn(features, labels, mode, params):
  """A two-layer classifier; returns an EstimatorSpec for every mode."""
  params = dict(DEFAULT_PARAMS, **params)
  net = tf.reshape(features['images'], [-1, IMAGE_SIZE * IMAGE_SIZE])
  # tf.compat.v1.layers needs TF_USE_LEGACY_KERAS=1 on TF 2.21; slim layers always work.
  net = slim.fully_connected(net, params['hidden_units'], scope='hidden',
                             weights_initializer=tf.compat.v1.glorot_uniform_initializer(seed=1))
  logits = slim.fully_connected(net, NUM_CLASSES, activation_fn=None, scope='logits',
                                weights_initializer=tf.compat.v1.glorot_uniform_initializer(
                                    seed=2))
  probabilities = tf.nn.softmax(logits)
  predictions = {'classes': tf.argmax(logits, 1, output_type=tf.int32),
                 'probabilities': probabilities,
                 'logits': logits}
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions=predictions, export_outputs={
        'serving_default': tfe.export.PredictOutput(predictions),
        'classify': tfe.export.ClassificationOutput(scores=probabilities)})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = None
  if mode == tfe.ModeKeys.TRAIN:
    # TowerOptimizer lets RunConfig(num_clones=N) combine the clones' updates.
    train_op = tfe.TowerOptimizer(_optimizer(params)).minimize(
        loss, tf.compat.v1.train.get_global_step())
  metrics = {'accuracy': tf.compat.v1.metrics.accuracy(labels, predictions['classes'])}
  return tfe.EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op,
                           eval_metric_ops=metrics)
