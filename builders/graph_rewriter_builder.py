"""Builds the graph rewrite a pipeline's `graph_rewriter` asks for; quantization is refused.

The OD API's programs ask for the rewrite like this (imports changed):

    from builders import graph_rewriter_builder
    graph_rewriter_fn = None
    if 'graph_rewriter_config' in configs:
      graph_rewriter_fn = graph_rewriter_builder.build(
          configs['graph_rewriter_config'], is_training=True)
    trainer.train(..., graph_hook_fn=graph_rewriter_fn)

The only rewrite the message has is quantization-aware training
(`graph_rewriter { quantization { delay weight_bits activation_bits } }`), which
rewrote the default graph with `tf.contrib.quantize`. TensorFlow 2.21 ships no
such rewriter: tf.contrib is gone, tf_slim has none, and
`tf.compat.v1.train.do_quantize_training_on_graphdef` returns a new GraphDef with
other ops and variables (no quantization delay, no `act_quant` min/max
variables), so it cannot stand in. `build` therefore raises a `ValueError` that
names `graph_rewriter.quantization` and says what to do instead, at build time,
before anything trains: a config that asks for quantization never trains in
float without saying so. Every program of ours that reads a pipeline config
(`trainer.train`, `trainer.eval`, `trainer.export`, `model_lib`) calls `build`
when the config has a `graph_rewriter`.
"""

from protos import graph_rewriter_pb2

QUANTIZATION_UNSUPPORTED = (
    'graph_rewriter.quantization (delay %d, weight_bits %d, activation_bits %d) is not '
    'supported: it rewrote the graph with tf.contrib.quantize, which TensorFlow 2.21 no '
    'longer has. Remove the graph_rewriter block to train in float, then quantize the '
    'exported model after training (tf.lite.TFLiteConverter with '
    'optimizations=[tf.lite.Optimize.DEFAULT] and a representative_dataset), or train a '
    'Keras model with tensorflow_model_optimization.quantization.keras.quantize_model '
    'for quantization-aware training.')


def build(graph_rewriter_config, is_training):
  """Returns the function that rewrites the default graph as configured.

  Args:
    graph_rewriter_config: a graph_rewriter_pb2.GraphRewriter.
    is_training: whether the graph is a training graph (the OD API made a
      training or an evaluation rewrite of it).

  Returns:
    Never returns here: quantization, the message's only rewrite (an empty
    `graph_rewriter {}` meant quantization with its defaults), is refused.

  Raises:
    ValueError: if `graph_rewriter_config` is not a GraphRewriter, and for
      every GraphRewriter, naming `graph_rewriter.quantization`.
  """
  del is_training
  if not isinstance(graph_rewriter_config, graph_rewriter_pb2.GraphRewriter):
    raise ValueError('graph_rewriter_config not of type graph_rewriter_pb2.GraphRewriter, '
                     'got %s' % type(graph_rewriter_config).__name__)
  quantization = graph_rewriter_config.quantization
  raise ValueError(QUANTIZATION_UNSUPPORTED % (
      quantization.delay, quantization.weight_bits, quantization.activation_bits))


def check_configs(configs, is_training):
  """Raises for a configs dict whose pipeline has a `graph_rewriter` (see `build`).

  Args:
    configs: the dict of `core.config_util.get_configs_from_pipeline_file`.
    is_training: as for `build`.
  """
  if 'graph_rewriter_config' in configs:
    build(configs['graph_rewriter_config'], is_training=is_training)
