"""`graph_rewriter` in a pipeline config: it parses (the OD API's GraphRewriter at field 6),
`config_util` hands it out as `graph_rewriter_config` next to `eval_input_config` and
`eval_input_configs`, and `builders.graph_rewriter_builder.build` (as the 2018 legacy
train.py / eval.py call it) refuses quantization by name, as do our own programs."""

import os
import sys

import pytest
import tensorflow as tf
from google.protobuf import text_format

# The user's imports, as changed from `object_detection.X`.
from builders import graph_rewriter_builder
from core import config_util
from protos import graph_rewriter_pb2
from protos import pipeline_pb2
from tests import fork_server
from trainer import exporter

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSD_CONFIG = os.path.join(REPO_ROOT, 'configs', 'ssd_shapes.config')

# What the zoo's quantized configs (ssd_mobilenet_v1_quantized_300x300_coco14_sync, ...) end with.
QUANTIZATION = """
graph_rewriter {
  quantization {
    delay: 48000
    weight_bits: 8
    activation_bits: 8
  }
}
"""
SECOND_EVAL_READER = """
eval_input_reader {
  name: "second"
  label_map_path: "data/shapes/label_map.pbtxt"
  tf_record_input_reader { input_path: "data/shapes/other.tfrecord" }
}
"""


@pytest.fixture(scope='module')
def quantized_config(tmp_path_factory):
  with open(SSD_CONFIG) as f:
    text = f.read()
  path = str(tmp_path_factory.mktemp('quantized') / 'pipeline.config')
  with open(path, 'w') as f:
    f.write(text + SECOND_EVAL_READER + QUANTIZATION)
  return path


def test_configs_carry_graph_rewriter_and_both_eval_input_keys(quantized_config):
  configs = config_util.get_configs_from_pipeline_file(quantized_config)
  rewriter = configs['graph_rewriter_config']
  assert isinstance(rewriter, graph_rewriter_pb2.GraphRewriter)
  assert (rewriter.quantization.delay, rewriter.quantization.weight_bits,
          rewriter.quantization.activation_bits) == (48000, 8, 8)
  # The 2017/2018 eval.py reads the first eval reader; 2019 programs the list.
  assert [c.name for c in configs['eval_input_configs']] == ['', 'second']
  assert configs['eval_input_config'] is configs['eval_input_configs'][0]
  assert list(configs['eval_input_config'].tf_record_input_reader.input_path) == [
      'data/shapes/val.tfrecord-*']
  # Round trip, and the OD API's field number on the wire (6, length-delimited: 0x32).
  pipeline = config_util.create_pipeline_proto_from_configs(configs)
  assert pipeline.graph_rewriter == rewriter
  assert len(pipeline.eval_input_reader) == 2
  wire = pipeline_pb2.TrainEvalPipelineConfig(graph_rewriter=rewriter).SerializeToString()
  assert wire[:1] == b'\x32'
  assert pipeline_pb2.TrainEvalPipelineConfig.DESCRIPTOR.fields_by_name[
      'graph_rewriter'].number == 6


def test_configs_without_graph_rewriter_have_no_key():
  configs = config_util.get_configs_from_pipeline_file(SSD_CONFIG)
  assert 'graph_rewriter_config' not in configs
  assert 'eval_input_config' in configs and len(configs['eval_input_configs']) == 1
  assert not config_util.create_pipeline_proto_from_configs(configs).HasField('graph_rewriter')


def test_quantization_defaults_are_the_od_apis():
  quantization = graph_rewriter_pb2.Quantization()
  assert (quantization.delay, quantization.weight_bits, quantization.activation_bits) == (
      500000, 8, 8)


def test_build_refuses_quantization_naming_the_field(quantized_config):
  configs = config_util.get_configs_from_pipeline_file(quantized_config)
  for is_training in (True, False):
    # 2018 legacy/train.py (is_training=True) and legacy/eval.py (False).
    with pytest.raises(ValueError) as raised:
      graph_rewriter_builder.build(configs['graph_rewriter_config'], is_training=is_training)
    message = str(raised.value)
    assert message.startswith('graph_rewriter.quantization (delay 48000, weight_bits 8, '
                              'activation_bits 8) is not supported')
    assert 'tf.contrib.quantize' in message and 'TFLiteConverter' in message
  # An empty graph_rewriter {} was quantization with its defaults.
  with pytest.raises(ValueError, match=r'graph_rewriter.quantization \(delay 500000'):
    graph_rewriter_builder.build(graph_rewriter_pb2.GraphRewriter(), is_training=True)
  with pytest.raises(ValueError, match='not of type graph_rewriter_pb2.GraphRewriter'):
    graph_rewriter_builder.build(text_format.Parse(QUANTIZATION, pipeline_pb2.
                                                   TrainEvalPipelineConfig()), True)


def test_export_refuses_a_quantized_pipeline(quantized_config, tmp_path):
  pipeline = config_util.load_pipeline_config(quantized_config)
  with pytest.raises(ValueError, match='graph_rewriter.quantization'):
    exporter.export_inference_graph('image_tensor', pipeline, str(tmp_path / 'model.ckpt-1'),
                                    str(tmp_path / 'export'))


@pytest.mark.parametrize('program,flags', [
    ('trainer.train', ['--train_dir={dir}']),
    ('trainer.eval', ['--checkpoint_dir={dir}', '--eval_dir={dir}/eval', '--run_once']),
])
def test_train_and_eval_programs_refuse_a_quantized_pipeline(quantized_config, tmp_path,
                                                             program, flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  proc = fork_server.run(
      [sys.executable, '-m', program, '--pipeline_config_path=' + quantized_config] +
      [f.format(dir=tmp_path) for f in flags],
      capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)
  assert proc.returncode != 0
  assert 'graph_rewriter.quantization (delay 48000' in proc.stderr, proc.stderr[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
