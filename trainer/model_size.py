"""The bytes of a model's training variables, for sizing ps pods: `python -m trainer.model_size`.

The manifest writer (deployment/k8s_sizes.py) sits below the model code, so
it does not build models itself: it runs this program with the model's
`DetectionModel` text on standard input and reads one integer back.

    echo 'ssd { ... }' | python -m trainer.model_size        # prints e.g. 2341728

    from trainer import model_size
    model_size.variable_bytes(configs['model'])               # the same, in-process

The model is built for training in a graph of its own (nothing runs), at the
size its resizer gives (a square 320 when it names none: the variables do not
depend on it), and its variables are weighed as deploy's device chooser
weighs them.
"""

import sys

from google.protobuf import text_format
import tensorflow as tf

from builders import model_builder
from deployment import device_setters
from protos import model_pb2

# Square images of this size when the resizer names none (variables do not depend on it).
_DEFAULT_IMAGE_SIZE = 320


def _image_size(model_config):
  """(height, width) the model's resizer produces, or a square default."""
  model = getattr(model_config, model_config.WhichOneof('model'))
  if not hasattr(model, 'image_resizer'):
    return _DEFAULT_IMAGE_SIZE, _DEFAULT_IMAGE_SIZE
  resizer = model.image_resizer
  kind = resizer.WhichOneof('image_resizer_oneof')
  if kind == 'fixed_shape_resizer':
    return resizer.fixed_shape_resizer.height, resizer.fixed_shape_resizer.width
  if kind == 'keep_aspect_ratio_resizer':
    size = resizer.keep_aspect_ratio_resizer.min_dimension
    return size, size
  return _DEFAULT_IMAGE_SIZE, _DEFAULT_IMAGE_SIZE


def variable_bytes(model_config):
  """Bytes of the variables the model of `model_config` creates for training."""
  graph = tf.Graph()
  with graph.as_default():
    model = model_builder.build(model_config, is_training=True, add_summaries=False)
    height, width = _image_size(model_config)
    images = tf.compat.v1.placeholder(tf.float32, [1, height, width, 3])
    preprocessed, true_shapes = model.preprocess(images)
    model.predict(preprocessed, true_shapes)
  return sum(device_setters.variable_bytes(op.node_def) for op in graph.get_operations()
             if device_setters.is_ps_op(op.type))


def main():
  model_config = text_format.Parse(sys.stdin.read(), model_pb2.DetectionModel())
  print(variable_bytes(model_config))
  return 0


if __name__ == '__main__':
  tf.compat.v1.disable_eager_execution()
  sys.exit(main())
