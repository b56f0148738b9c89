"""Tests for core.config_util: loading, errors naming the field, overrides."""

import logging
import os
import re
import sys

import pytest

from core import config_util
from protos import pipeline_pb2

_GOOD = """
model { ssd { num_classes: 3 } }
train_config {
  batch_size: 8
  num_steps: 100
  optimizer { momentum_optimizer {
    learning_rate { constant_learning_rate { learning_rate: 0.01 } } } }
}
train_input_reader { tf_record_input_reader { input_path: "a-*.tfrecord" } }
eval_input_reader { tf_record_input_reader { input_path: "b.tfrecord" } }
deploy_config { num_clones: 2 variable_update: REPLICATED }
"""


def _write(tmp_path, text, name='pipeline.config'):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def test_loads_a_good_config_into_the_od_dict(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(
      _write(tmp_path, _GOOD), required_sections=config_util.TRAIN_SECTIONS)
  assert configs['model'].ssd.num_classes == 3
  assert configs['train_config'].batch_size == 8
  assert configs['train_config'].startup_delay_steps == 15  # OD default kept.
  assert not configs['train_config'].optimizer.use_moving_average
  assert list(configs['train_input_config'].tf_record_input_reader.input_path) == [
      'a-*.tfrecord']
  assert len(configs['eval_input_configs']) == 1
  assert configs['eval_input_config'].tf_record_input_reader.input_path[0] == 'b.tfrecord'
  assert configs['deploy_config'].variable_update == pipeline_pb2.DeployConfig.REPLICATED


def test_defaults_follow_the_od_api():
  train = pipeline_pb2.TrainEvalPipelineConfig().train_config
  assert train.batch_size == 32
  assert train.keep_checkpoint_every_n_hours == 10000.0
  assert train.replicas_to_aggregate == 1
  assert train.add_regularization_loss
  assert train.DESCRIPTOR.fields_by_name['fine_tune_checkpoint_type'].number == 22
  assert train.DESCRIPTOR.fields_by_name['freeze_variables'].number == 12
  assert train.DESCRIPTOR.fields_by_name['bias_grad_multiplier'].number == 11
  assert train.DESCRIPTOR.fields_by_name['gradient_clipping_by_norm'].number == 6
  assert train.DESCRIPTOR.fields_by_name['sync_replicas'].number == 3
  assert train.DESCRIPTOR.fields_by_name['replicas_to_aggregate'].number == 13
  assert train.DESCRIPTOR.fields_by_name['keep_checkpoint_every_n_hours'].number == 4
  reader = pipeline_pb2.TrainEvalPipelineConfig().train_input_reader
  assert reader.shuffle_buffer_size == 2048 and reader.num_readers == 64


@pytest.mark.parametrize('text, line, field, words', [
    ('train_config {\n  batch_sizee: 4\n}\n', 2, 'batch_sizee', 'no field named'),
    ('train_config {\n  batch_size: "abc"\n}\n', 2, 'batch_size', 'integer'),
    ('train_config {\n  batch_size: -3\n}\n', 2, 'batch_size', 'out of range'),
    ('deploy_config { variable_update: FOO }\n', 1, 'variable_update', 'FOO'),
    ('train_config {\n  sync_replicas: maybe\n}\n', 2, 'sync_replicas', 'true'),
    ('train_config { optimizer { adam_optimizer {\n epsilon: x } } }\n', 2, 'epsilon',
     'float'),
    ('model { ssd { num_classes: 1.5 } }\n', 1, 'num_classes', 'integer'),
    ('train_config {\n batch_size: 1\n batch_size: 2 }\n', 3, 'batch_size', 'multiple'),
    ('train_config: 3\n', 1, 'train_config', 'Expected'),
    ('model { nonexistent_model { } }\n', 1, 'nonexistent_model', 'no field named'),
])
def test_bad_fields_give_one_line_errors_naming_file_line_and_field(
    tmp_path, text, line, field, words):
  path = _write(tmp_path, text)
  with pytest.raises(ValueError) as info:
    config_util.load_pipeline_config(path)
  message = str(info.value)
  assert '\n' not in message
  assert message.startswith('%s:%d:' % (path, line)), message
  assert "field '%s'" % field in message, message
  assert words in message, message


def test_unterminated_message_names_the_file_and_line(tmp_path):
  path = _write(tmp_path, 'train_config {\n  batch_size: 4\n')
  with pytest.raises(ValueError, match=r'pipeline.config:\d+:\d+: .*Expected'):
    config_util.load_pipeline_config(path)


def test_missing_file_is_named(tmp_path):
  missing = str(tmp_path / 'nope.config')
  with pytest.raises(ValueError, match='not found: .*nope.config'):
    config_util.load_pipeline_config(missing)
  with pytest.raises(ValueError, match='pipeline_config_path is empty'):
    config_util.load_pipeline_config('')


def test_missing_required_section_is_named(tmp_path):
  path = _write(tmp_path, 'model { ssd { num_classes: 1 } }\ntrain_config { }\n')
  with pytest.raises(ValueError, match="missing required section 'train_input_reader'"):
    config_util.get_configs_from_pipeline_file(
        path, required_sections=config_util.TRAIN_SECTIONS)
  path = _write(tmp_path, 'model { }\ntrain_config {}\ntrain_input_reader {}\n', 'b.config')
  with pytest.raises(ValueError, match="'model' names no model"):
    config_util.get_configs_from_pipeline_file(
        path, required_sections=config_util.TRAIN_SECTIONS)


def test_text_and_dotted_overrides(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(
      _write(tmp_path, _GOOD),
      config_override='train_config { num_steps: 7 }',
      overrides={'train_config.batch_size': 4,
                 'deploy_config.variable_update': 'PARAMETER_SERVER',
                 'train_config.freeze_variables': ['a.*', 'b']})
  assert configs['train_config'].num_steps == 7
  assert configs['train_config'].batch_size == 4
  assert configs['deploy_config'].variable_update == pipeline_pb2.DeployConfig.PARAMETER_SERVER
  assert list(configs['train_config'].freeze_variables) == ['a.*', 'b']


@pytest.mark.parametrize('overrides, words', [
    ({'train_config.batch_sizee': 3}, "no field 'batch_sizee'"),
    ({'train_config.batch_size': 'x'}, "override 'train_config.batch_size': bad value"),
    ({'train_config.batch_size.x': 1}, 'not a single message field'),
    ({'deploy_config.variable_update': 'NOPE'}, 'bad value'),
])
def test_bad_overrides_are_named(tmp_path, overrides, words):
  with pytest.raises(ValueError, match=words):
    config_util.get_configs_from_pipeline_file(_write(tmp_path, _GOOD), overrides=overrides)
  with pytest.raises(ValueError, match=r"config_override:1:\d+: field 'num_stepz'"):
    config_util.get_configs_from_pipeline_file(
        _write(tmp_path, _GOOD), config_override='train_config { num_stepz: 1 }')


def test_save_round_trips_atomically(tmp_path):
  configs = config_util.get_configs_from_pipeline_file(_write(tmp_path, _GOOD))
  out_dir = tmp_path / 'train'
  written = config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), str(out_dir))
  assert written == os.path.join(str(out_dir), 'pipeline.config')
  assert sorted(os.listdir(out_dir)) == ['pipeline.config']  # no temp file left
  again = config_util.get_configs_from_pipeline_file(written)
  assert again['train_config'] == configs['train_config']
  assert again['deploy_config'] == configs['deploy_config']



def _save(tmp_path, num_steps, directory):
  configs = config_util.get_configs_from_pipeline_file(
      _write(tmp_path, _GOOD), overrides={'train_config.num_steps': num_steps})
  return config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), directory)


def test_a_different_earlier_config_is_kept_and_the_difference_logged(tmp_path, caplog):
  train_dir = str(tmp_path / 'train')
  first = _save(tmp_path, 100, train_dir)
  with open(first) as f:
    first_text = f.read()
  with caplog.at_level(logging.WARNING):
    _save(tmp_path, 250, train_dir)
  kept = [n for n in os.listdir(train_dir) if n != 'pipeline.config']
  assert len(kept) == 1 and re.fullmatch(r'pipeline\.config\.\d{8}-\d{6}', kept[0]), kept
  with open(os.path.join(train_dir, kept[0])) as f:
    assert f.read() == first_text
  assert config_util.load_pipeline_config(first).train_config.num_steps == 250
  warning = '\n'.join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
  assert 'kept as %s' % os.path.join(train_dir, kept[0]) in warning
  assert '-  num_steps: 100' in warning and '+  num_steps: 250' in warning


def test_the_same_config_again_is_not_kept_twice(tmp_path):
  train_dir = str(tmp_path / 'train')
  _save(tmp_path, 100, train_dir)
  _save(tmp_path, 100, train_dir)
  assert os.listdir(train_dir) == ['pipeline.config']


def test_saved_config_gets_the_umask_permissions(tmp_path):
  previous = os.umask(0o022)
  try:
    path = _save(tmp_path, 100, str(tmp_path / 'train'))
  finally:
    os.umask(previous)
  assert os.stat(path).st_mode & 0o777 == 0o644


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
