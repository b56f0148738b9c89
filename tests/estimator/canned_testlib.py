"""Synthetic tabular data and feature columns for the canned DNN / wide-and-deep tests.

Each example has a numeric `x`, a numeric `age` (bucketized too), a `city`
string (hashed into 64 buckets, embedded or used linearly) and a `color`
string from a vocabulary (one-hot). The target is a fixed function of them:

    score = 1.5 * x + CITY_EFFECT[city] + COLOR_EFFECT[color] + 1.5 * (age > 50) - 0.75

binary label: score > 0; three classes: score below -1, between, above 1;
regression target: score plus N(0, 0.1) noise. Deterministic per seed.

    features, labels = canned_testlib.make_data(512, seed=0, task='binary')
    est.train(canned_testlib.train_input_fn(features, labels), max_steps=200)
"""

import numpy as np
import tensorflow as tf

from trainer import estimator as tfe

fc = tf.compat.v1.feature_column

NUM_CITIES = 24
CITIES = np.array([b'city%02d' % i for i in range(NUM_CITIES)])
COLORS = np.array([b'red', b'green', b'blue'])
CITY_EFFECT = np.random.RandomState(99).normal(0.0, 1.5, NUM_CITIES)
COLOR_EFFECT = np.array([-1.0, 0.0, 1.0])
HASH_BUCKETS = 64


def make_data(num_examples, seed=0, task='binary'):
  """(features dict of numpy arrays, labels) for task 'binary', 'multiclass' or 'regression'."""
  rng = np.random.RandomState(seed)
  city = rng.randint(0, NUM_CITIES, num_examples)
  color = rng.randint(0, len(COLORS), num_examples)
  x = rng.normal(0.0, 1.0, num_examples).astype(np.float32)
  age = rng.uniform(18.0, 80.0, num_examples).astype(np.float32)
  score = 1.5 * x + CITY_EFFECT[city] + COLOR_EFFECT[color] + 1.5 * (age > 50) - 0.75
  features = {'x': x, 'age': age, 'city': CITIES[city], 'color': COLORS[color]}
  if task == 'binary':
    labels = (score > 0).astype(np.int64)
  elif task == 'multiclass':
    labels = np.digitize(score, [-1.0, 1.0]).astype(np.int64)
  elif task == 'regression':
    labels = (score + rng.normal(0.0, 0.1, num_examples)).astype(np.float32)
  else:
    raise ValueError('task must be binary, multiclass or regression, got %r' % task)
  return features, labels


def train_input_fn(features, labels, batch_size=32):
  """Shuffled batches forever (full batches only)."""
  return tfe.inputs.numpy_input_fn(features, labels, batch_size=batch_size, num_epochs=None,
                                   shuffle=True, queue_capacity=len(labels))


def eval_input_fn(features, labels=None, batch_size=128):
  """One pass in order."""
  return tfe.inputs.numpy_input_fn(features, labels, batch_size=batch_size, num_epochs=1,
                                   shuffle=False)


def base_columns():
  """The categorical / numeric columns the others are built from."""
  city = fc.categorical_column_with_hash_bucket('city', HASH_BUCKETS)
  color = fc.categorical_column_with_vocabulary_list('color', [c.decode() for c in COLORS])
  x = fc.numeric_column('x')
  age = fc.numeric_column('age', normalizer_fn=lambda t: (t - 50.0) / 20.0)
  return city, color, x, age


def dnn_columns(embedding_dimension=4):
  """Embedding, indicator, numeric and bucketized columns for a DNN."""
  city, color, x, age = base_columns()
  return [fc.embedding_column(city, embedding_dimension), fc.indicator_column(color), x,
          fc.bucketized_column(fc.numeric_column('age'), [30.0, 40.0, 50.0, 60.0, 70.0]), age]


def linear_columns():
  """Sparse, bucketized and numeric columns for the linear part."""
  city, color, x, _ = base_columns()
  return [city, color, x,
          fc.bucketized_column(fc.numeric_column('age'), [30.0, 40.0, 50.0, 60.0, 70.0])]


def serialized_examples(features):
  """The tf.Example protos of a feature dict, serialized (what a parsing receiver reads)."""
  examples = []
  for i in range(len(features['x'])):
    examples.append(tf.train.Example(features=tf.train.Features(feature={
        'x': tf.train.Feature(float_list=tf.train.FloatList(value=[features['x'][i]])),
        'age': tf.train.Feature(float_list=tf.train.FloatList(value=[features['age'][i]])),
        'city': tf.train.Feature(bytes_list=tf.train.BytesList(value=[features['city'][i]])),
        'color': tf.train.Feature(bytes_list=tf.train.BytesList(value=[features['color'][i]])),
    })).SerializeToString())
  return examples


# Slices of at most 128 bytes: the 64-bucket city tables (linear weights 64x1 floats, the
# embedding 64x4 floats) are split in two over two ps tasks; smaller variables stay whole.
CLUSTER_MIN_SLICE_SIZE = 128
CITY_EMBEDDING = 'dnn/input_from_feature_columns/input_layer/city_embedding/embedding_weights'
CITY_LINEAR = 'linear/linear_model/city/weights'


def wide_deep_for_cluster(model_dir, config):
  """The wide-and-deep classifier of the cluster test (also trained in one process there).

  The city tables are split in two parts both on two ps tasks and in one
  process, so the two runs build the same model.
  """
  return tfe.DNNLinearCombinedClassifier(
      model_dir=model_dir, linear_feature_columns=linear_columns(),
      linear_optimizer=lambda: tf.compat.v1.train.FtrlOptimizer(0.1),
      dnn_feature_columns=dnn_columns(),
      dnn_optimizer=lambda: tf.compat.v1.train.AdagradOptimizer(0.1), dnn_hidden_units=[16, 8],
      input_layer_partitioner=tf.compat.v1.min_max_variable_partitioner(
          max_partitions=2, min_slice_size=CLUSTER_MIN_SLICE_SIZE),
      config=config)
