"""Datasets whose iterators end at once when their session is closed.

A training task starts a new session on its graph after a lost ps (and the
Estimator path after a lost peer). TensorFlow 2.21 destroys the old session's
iterator when the old session is deleted, and it does so on the task's own
worker service while holding the lock that every new session and every step
on that task also take. An iterator whose dataset has tf.data autotuning on
owns a model thread, and destroying the iterator waits for that thread. In the
ps failover benchmark that wait was 15 to 43 s in one recovery of three (the
chief's or a worker's new session was stuck in `SessionMgr::CreateSession`
behind `~IteratorResource`, its model thread still in `Model::OptimizeLoop`):
the task could neither start its new session nor step until the old iterator
was gone. Without autotuning there is no model thread, and the iterator ends
with its session.

    from core import dataset_teardown

    dataset = dataset_teardown.prompt_teardown(dataset)
    iterator = tf.compat.v1.data.make_initializable_iterator(dataset)

Differs on purpose from tf.data's defaults: autotuning is off, so each
`tf.data.AUTOTUNE` setting keeps the starting value tf.data picks for it
instead of being tuned while training runs (benchmarks/RESULTS.md, input
pipeline, has the effect on our pipeline). `SLIMTRAIN_TF_DATA_AUTOTUNE=1`
keeps autotuning on (and the wait with it), and so does a dataset whose own
options set it.
"""

import os
import warnings

import tensorflow as tf

AUTOTUNE_ENV = 'SLIMTRAIN_TF_DATA_AUTOTUNE'


def autotune_kept():
  """Whether `SLIMTRAIN_TF_DATA_AUTOTUNE=1` asks to keep tf.data autotuning on."""
  return os.environ.get(AUTOTUNE_ENV, '0') == '1'


def _own_autotune_setting(dataset):
  """The autotune `enabled` the dataset's options set, or None."""
  with warnings.catch_warnings():
    # In graph mode tf.data warns that options() may miss options set inside a
    # serialized graph; those an input_fn sets in Python are seen.
    warnings.simplefilter('ignore', UserWarning)
    return dataset.options().autotune.enabled


def prompt_teardown(dataset):
  """`dataset` with tf.data autotuning off, unless asked to keep it.

  Autotuning stays as it is under `SLIMTRAIN_TF_DATA_AUTOTUNE=1`, and when the
  dataset's own options already set it (a user's input_fn that chose either way).

  Args:
    dataset: a `tf.data.Dataset`.

  Returns:
    A dataset of the same elements whose iterator has no autotuning thread, or
    `dataset` itself when autotuning is kept.
  """
  if autotune_kept() or _own_autotune_setting(dataset) is not None:
    return dataset
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)
