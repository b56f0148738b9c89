"""Our protos carry the OD API's schema: every message, field, number, type,
label, default, oneof and enum value of the TF1 generation, so OD API configs
(text or binary) parse here to the same values.

`data/od_proto_schema_451906e4.json` lists those facts for
research/object_detection/protos at tensorflow/models 451906e4 (the last
TF1-era state of the zoo's sample configs), read from protoc's descriptors.
"""

import glob
import importlib
import json
import os

from google.protobuf import descriptor_pb2
from google.protobuf import text_format

import protos  # noqa: F401
from protos import eval_pb2
from protos import model_pb2
from protos import optimizer_pb2
from protos import pipeline_pb2
from protos import ssd_pb2

_FLOAT = descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT
_DOUBLE = descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE
_FACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                      'od_proto_schema_451906e4.json')

# Departures on purpose, each documented in the .proto beside the field.
_DEPARTURES = {
    # tf.contrib's MovingAverageOptimizer is gone; averaging is opt-in here.
    ('Optimizer', 'use_moving_average'): {'default': 'false'},
}

# slimtrain's own fields: numbered where no OD API version puts a field.
_ADDITIONS = {
    'TrainEvalPipelineConfig': {'deploy_config': 100},
    'DetectionModel': {'slim_classifier': 100},
    'Optimizer': {'sgd_optimizer': 100, 'learning_rate_scaling': 101,
                  'reference_batch_size': 102},
    'AdamOptimizer': {'beta1': 100, 'beta2': 101},
    'InputReader': {'decoder_type': 100, 'shard_by_worker': 101, 'num_parallel_calls': 102},
    'EvalConfig': {'eval_timeout_secs': 100},
    'TrainConfig': {'run_fine_tune_checkpoint_dummy_computation': 30,
                    'use_mixed_precision': 100, 'use_xla': 101, 'log_every_n_steps': 102,
                    'save_interval_secs': 103, 'save_summaries_secs': 104,
                    'skip_corrupt_records': 105, 'check_gradient_norm': 110,
                    'debug_nan_loss_at_step': 111},
}


def _load_facts():
  with open(_FACTS) as f:
    return json.load(f)


def _our_files():
  """FileDescriptorProtos of every protos/*.proto."""
  modules = [importlib.import_module('protos.' + os.path.basename(path)[:-3])
             for path in glob.glob(os.path.join(os.path.dirname(protos.__file__),
                                                '*_pb2.py'))]
  pending, seen, files = {module.DESCRIPTOR for module in modules}, set(), []
  while pending:
    file_descriptor = pending.pop()
    if file_descriptor.name in seen:
      continue
    seen.add(file_descriptor.name)
    pending.update(file_descriptor.dependencies)
    proto = descriptor_pb2.FileDescriptorProto()
    file_descriptor.CopyToProto(proto)
    files.append(proto)
  return files


def _our_messages():
  """{'Message.Nested': DescriptorProto} of every message in our protos."""
  found = {}

  def walk(message, prefix):
    found[prefix + message.name] = message
    for nested in message.nested_type:
      walk(nested, prefix + message.name + '.')

  for proto in _our_files():
    for message in proto.message_type:
      walk(message, '')
  return found


def _same_default(field_type, ours, theirs):
  """Float defaults compare as numbers (the runtime prints 1e-08 as 9.99999994e-09)."""
  if ours is None or theirs is None or field_type not in (_FLOAT, _DOUBLE):
    return ours == theirs
  return abs(float(ours) - float(theirs)) <= 1e-6 * max(abs(float(theirs)), 1e-30)


def _field_facts(message, field):
  return {
      'number': field.number, 'label': field.label, 'type': field.type,
      'type_name': field.type_name.lstrip('.').replace('slimtrain.protos.', ''),
      'default': field.default_value if field.HasField('default_value') else None,
      'oneof': message.oneof_decl[field.oneof_index].name
               if field.HasField('oneof_index') else None,
  }


def test_every_od_message_and_field_is_ours_unchanged():
  facts = _load_facts()
  ours = _our_messages()
  problems = []
  for message_name, fields in sorted(facts['messages'].items()):
    message = ours.get(message_name)
    if message is None:
      problems.append('missing message %s' % message_name)
      continue
    our_fields = {f.name: f for f in message.field}
    for field_name, expected in sorted(fields.items()):
      if field_name not in our_fields:
        problems.append('missing field %s.%s' % (message_name, field_name))
        continue
      actual = _field_facts(message, our_fields[field_name])
      expected = dict(expected, **_DEPARTURES.get((message_name, field_name), {}))
      if _same_default(actual['type'], actual['default'], expected['default']):
        actual['default'] = expected['default']
      if actual != expected:
        problems.append('%s.%s: ours %s, OD API %s' % (message_name, field_name, actual,
                                                       expected))
  assert problems == []
  assert len(facts['messages']) == 145


def test_enums_have_the_od_values():
  facts = _load_facts()
  ours = _our_messages()
  enums = {}
  for message_name, message in ours.items():
    for enum in message.enum_type:
      enums[message_name + '.' + enum.name] = {v.name: v.number for v in enum.value}
  for proto in _our_files():
    for enum in proto.enum_type:
      enums[enum.name] = {v.name: v.number for v in enum.value}
  for name, values in facts['enums'].items():
    assert enums.get(name) == values, name


def test_our_additions_are_the_only_extra_fields():
  facts = _load_facts()['messages']
  for message_name, message in _our_messages().items():
    if message_name not in facts:
      continue
    extra = {f.name: f.number for f in message.field
             if f.name not in facts[message_name]}
    assert extra == _ADDITIONS.get(message_name, {}), message_name
    od_numbers = {f['number'] for f in facts[message_name].values()}
    assert not od_numbers & set(extra.values()), message_name


def test_text_and_binary_od_configs_parse_to_the_same_values():
  text = '''
    model { ssd {
      num_classes: 90
      feature_extractor { type: "ssd_mobilenet_v1" min_depth: 16 depth_multiplier: 1.0
        conv_hyperparams { activation: RELU_6 regularizer { l2_regularizer { weight: 4e-5 } }
          initializer { truncated_normal_initializer { stddev: 0.03 } }
          batch_norm { train: true scale: true decay: 0.9997 epsilon: 0.001 } } }
      matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5 } }
      similarity_calculator { iou_similarity {} }
      anchor_generator { ssd_anchor_generator { num_layers: 6 aspect_ratios: 2.0 } }
      box_predictor { convolutional_box_predictor { kernel_size: 1 box_code_size: 4
        conv_hyperparams { activation: RELU_6 } } }
    } }
    train_config { batch_size: 24 fine_tune_checkpoint: "model.ckpt"
      fine_tune_checkpoint_type: "detection"
      optimizer { rms_prop_optimizer { learning_rate { exponential_decay_learning_rate {
        initial_learning_rate: 0.004 } } } }
      data_augmentation_options { ssd_random_crop {} } }
    eval_input_reader { tf_record_input_reader { input_path: "a" } }
    eval_input_reader { tf_record_input_reader { input_path: "b" } }
  '''
  from_text = text_format.Parse(text, pipeline_pb2.TrainEvalPipelineConfig())
  from_binary = pipeline_pb2.TrainEvalPipelineConfig.FromString(
      from_text.SerializeToString())
  assert from_binary == from_text
  ssd = from_binary.model.ssd
  assert ssd.matcher.WhichOneof('matcher_oneof') == 'argmax_matcher'
  assert ssd.box_predictor.convolutional_box_predictor.box_code_size == 4
  assert abs(ssd.feature_extractor.conv_hyperparams.batch_norm.decay - 0.9997) < 1e-6
  assert len(from_binary.eval_input_reader) == 2
  # Field numbers are the OD API's: Ssd.box_predictor is 7, anchor_generator 8.
  assert ssd_pb2.Ssd.DESCRIPTOR.fields_by_name['box_predictor'].number == 7
  assert ssd_pb2.Ssd.DESCRIPTOR.fields_by_name['anchor_generator'].number == 8
  assert 'slim_classifier' in model_pb2.DetectionModel.DESCRIPTOR.fields_by_name
  assert eval_pb2 and optimizer_pb2


if __name__ == '__main__':
  import sys
  import pytest
  sys.exit(pytest.main([__file__]))
