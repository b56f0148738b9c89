"""A user's TF-Slim evaluation script, as the tf_slim import hook's tests run it.

Shaped like research/slim's `eval_image_classifier.py` (written for these
tests): it imports TensorFlow, `tf_slim` and `tf_slim.nets` only, reads
tf.Examples through `slim.dataset_data_provider` and
`slim.tfexample_decoder.Image`, builds a small resnet_v1, restores a
checkpoint and runs `slim.evaluation.evaluate_once` with streaming metrics.
On TF 2.21 it works only when something applies slimtrain's core.compat; here
that is the `slimtrain_tf_slim_hook.pth` an install of slimtrain puts into
site-packages.

    python slim_eval_script.py --dataset_file=D --checkpoint_path=C --eval_dir=E

Prints `COMPAT <ids>` (the fixes applied in this process, when core.compat was
imported by the hook) and `EVAL accuracy=<a> recall_at_1=<r>`. With
`--import_slimtrain_after` it then imports a slimtrain package, applies compat
once more, prints `REAPPLIED <ids>` and evaluates again.

`write_records` and `write_checkpoint` make its inputs; the tests call them in
their own process.
"""

import argparse
import sys

import numpy as np
import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_v1

tf1 = tf.compat.v1

IMAGE_SIZE = 8
NUM_CLASSES = 2
NUM_EXAMPLES = 8
BATCH_SIZE = 4
SCOPE = 'tiny_resnet'


def _class_of(index):
  return index % NUM_CLASSES


def write_records(path):
  """Writes NUM_EXAMPLES PNG tf.Examples: class 0 dark, class 1 bright."""
  with tf.Graph().as_default(), tf1.Session() as sess:
    pixels = tf1.placeholder(tf.uint8, [IMAGE_SIZE, IMAGE_SIZE, 3])
    encode = tf.image.encode_png(pixels)
    with tf.io.TFRecordWriter(path) as writer:
      for index in range(NUM_EXAMPLES):
        value = 40 + 160 * _class_of(index)
        image = np.full([IMAGE_SIZE, IMAGE_SIZE, 3], value, np.uint8)
        feature = {
            'image/encoded': tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[sess.run(encode, {pixels: image})])),
            'image/format': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'png'])),
            'image/class/label': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[_class_of(index)])),
        }
        writer.write(tf.train.Example(
            features=tf.train.Features(feature=feature)).SerializeToString())


def network(images):
  """A one-unit resnet_v1 from tf_slim.nets; returns logits [batch, NUM_CLASSES]."""
  blocks = [resnet_v1.resnet_v1_block('block1', base_depth=2, num_units=1, stride=1)]
  with slim.arg_scope(resnet_v1.resnet_arg_scope()):
    logits, _ = resnet_v1.resnet_v1(images, blocks, num_classes=NUM_CLASSES, is_training=False,
                                    include_root_block=False, scope=SCOPE)
  return tf.squeeze(logits, [1, 2])  # tf_slim's resnet_v1 keeps the 1x1 spatial dimensions


def write_checkpoint(prefix):
  """Saves the network's (seeded) initial variables under `prefix`; returns the path."""
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    network(tf.zeros([1, IMAGE_SIZE, IMAGE_SIZE, 3]))
    tf1.train.get_or_create_global_step()
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return saver.save(sess, prefix)


def _dataset(path):
  keys_to_features = {
      'image/encoded': tf1.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf1.FixedLenFeature((), tf.string, default_value='png'),
      'image/class/label': tf1.FixedLenFeature([1], tf.int64, default_value=[-1]),
  }
  items_to_handlers = {
      'image': slim.tfexample_decoder.Image(shape=[IMAGE_SIZE, IMAGE_SIZE, 3]),
      'label': slim.tfexample_decoder.Tensor('image/class/label', shape=[]),
  }
  decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
  return slim.dataset.Dataset(data_sources=path, reader=tf1.TFRecordReader, decoder=decoder,
                              num_samples=NUM_EXAMPLES, items_to_descriptions={})


def evaluate(dataset_file, checkpoint_path, eval_dir):
  """Evaluates the checkpoint once; returns {metric name: value}."""
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    provider = slim.dataset_data_provider.DatasetDataProvider(
        _dataset(dataset_file), shuffle=False, num_readers=1, common_queue_capacity=2 * BATCH_SIZE,
        common_queue_min=BATCH_SIZE)
    image, label = provider.get(['image', 'label'])
    image = tf.cast(image, tf.float32) / 255.0
    images, labels = tf1.train.batch([image, label], batch_size=BATCH_SIZE, num_threads=1,
                                     capacity=2 * BATCH_SIZE)
    logits = network(images)
    predictions = tf.argmax(logits, 1)
    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        'accuracy': slim.metrics.streaming_accuracy(predictions, labels),
        'recall_at_1': slim.metrics.streaming_recall_at_k(logits, labels, 1),
    })
    values = slim.evaluation.evaluate_once(
        master='', checkpoint_path=checkpoint_path, logdir=eval_dir,
        num_evals=NUM_EXAMPLES // BATCH_SIZE, eval_op=list(names_to_updates.values()),
        final_op=names_to_values, variables_to_restore=slim.get_variables_to_restore(),
        session_config=tf1.ConfigProto(intra_op_parallelism_threads=1,
                                       inter_op_parallelism_threads=2))
  return {name: float(value) for name, value in values.items()}


def _print_eval(values):
  print('EVAL ' + ' '.join('%s=%.4f' % item for item in sorted(values.items())), flush=True)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--dataset_file', required=True)
  parser.add_argument('--checkpoint_path', required=True)
  parser.add_argument('--eval_dir', required=True)
  parser.add_argument('--import_slimtrain_after', action='store_true')
  args = parser.parse_args()
  tf1.disable_eager_execution()
  compat = sys.modules.get('core.compat')
  print('COMPAT %s' % (','.join(compat.applied_fixes()) if compat else '-'), flush=True)
  _print_eval(evaluate(args.dataset_file, args.checkpoint_path, args.eval_dir))
  if args.import_slimtrain_after:
    # What a program that later imports slimtrain (as its docs say) does.
    from deployment import model_deploy  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from core import compat as slimtrain_compat  # pylint: disable=import-outside-toplevel
    print('REAPPLIED %s' % (','.join(slimtrain_compat.apply()) or '-'), flush=True)
    _print_eval(evaluate(args.dataset_file, args.checkpoint_path, args.eval_dir))


if __name__ == '__main__':
  main()
