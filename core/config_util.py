"""Reading, overriding, checking and writing text-format pipeline configs.

A pipeline config is one `TrainEvalPipelineConfig` text proto
(protos/pipeline.proto). Typical use, as the trainer does it:

    from core import config_util
    configs = config_util.get_configs_from_pipeline_file(
        'configs/ssd_shapes.config',
        config_override='train_config { num_steps: 200 }')
    configs['train_config'].batch_size            # -> 16
    config_util.save_pipeline_config(
        config_util.create_pipeline_proto_from_configs(configs), train_dir)

Every problem with a config file is a one-line `ValueError` that names the
file, the line and the field, e.g.

    ValueError: configs/x.config:3:5: field 'batch_sizee': Message type
    "slimtrain.protos.TrainConfig" has no field named "batch_sizee".

Dotted-path overrides (`{'train_config.num_steps': 100}`) are checked the same
way: an unknown path or a value of the wrong type names the path.
"""

import difflib
import re
import time

from core import logs as logging
from google.protobuf import descriptor as descriptor_lib
from google.protobuf import text_format
import tensorflow as tf

from core import label_map_util
from core import paths
from protos import pipeline_pb2

PIPELINE_CONFIG_NAME = 'pipeline.config'

# Sections a training job cannot run without.
TRAIN_SECTIONS = ('model', 'train_config', 'train_input_reader')
# Sections an evaluation job cannot run without.
EVAL_SECTIONS = ('model', 'eval_config', 'eval_input_reader')

_FIELD_BEFORE_VALUE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*:?\s*[^:{}]*$')


def _field_at(text, line, column):
  """Best guess of the field name a parse error at (line, column) is about."""
  lines = text.splitlines()
  if not 1 <= line <= len(lines):
    return None
  prefix = lines[line - 1][:max(column, 0)]
  quoted = re.search(r'named "([^"]+)"', prefix)
  if quoted:
    return quoted.group(1)
  match = _FIELD_BEFORE_VALUE.search(prefix.rstrip(' }'))
  return match.group(1) if match else None


def _parse_error(path, text, error):
  """Turns a text_format.ParseError into a one-line ValueError."""
  message = str(error)
  line, column = error.GetLine(), error.GetColumn()
  # Drop protobuf's 'L:C : ' prefix and its quoted copy of the input line.
  message = re.sub(r"^\d+:\d+ : ", '', message)
  message = re.sub(r"^'.*?': ", '', message)
  field = None
  named = re.search(r'field named "([^"]+)"', message)
  if named:
    field = named.group(1)
  elif line:
    field = _field_at(text, line, column)
  location = '%s:%s:%s' % (path, line, column) if line else path
  if field:
    return ValueError("%s: field '%s': %s" % (location, field, message))
  return ValueError('%s: %s' % (location, message))


def parse_pipeline_config(text, path='<string>'):
  """Parses a text-format TrainEvalPipelineConfig.

  Args:
    text: the config text.
    path: the file name to use in error messages.

  Returns:
    A `pipeline_pb2.TrainEvalPipelineConfig`.

  Raises:
    ValueError: naming path, line and field for unknown fields, values of the
      wrong type, unknown enum values and syntax errors.
  """
  config = pipeline_pb2.TrainEvalPipelineConfig()
  try:
    # Parse (not Merge): a scalar field given twice in one file is an error.
    text_format.Parse(text, config)
  except text_format.ParseError as e:
    raise _parse_error(path, text, e) from None
  return config


def load_pipeline_config(pipeline_config_path):
  """Reads and parses a pipeline config file.

  Raises:
    ValueError: if the file does not exist, cannot be read, or does not parse.
  """
  if not pipeline_config_path:
    raise ValueError('pipeline_config_path is empty: pass the path of a '
                     'text-format TrainEvalPipelineConfig file')
  if (not paths.exists(pipeline_config_path) or
      paths.isdir(pipeline_config_path)):
    raise ValueError('pipeline config file not found: %s' % pipeline_config_path)
  try:
    text = paths.read_text(pipeline_config_path)
  except (tf.errors.OpError, UnicodeDecodeError) as e:
    raise ValueError('cannot read pipeline config %s: %s' %
                     (pipeline_config_path, e)) from None
  return parse_pipeline_config(text, pipeline_config_path)


def check_required_sections(pipeline_config, sections=TRAIN_SECTIONS,
                            path='<pipeline config>'):
  """Raises ValueError naming the first of `sections` that is not set."""
  for section in sections:
    field = pipeline_config.DESCRIPTOR.fields_by_name[section]
    if field.is_repeated:
      present = len(getattr(pipeline_config, section)) > 0
    else:
      present = pipeline_config.HasField(section)
    if not present:
      raise ValueError("%s: missing required section '%s'" % (path, section))
  if 'model' in sections and not pipeline_config.model.WhichOneof('model'):
    raise ValueError("%s: section 'model' names no model (set e.g. 'ssd' or "
                     "'slim_classifier')" % path)


def _set_field(message, dotted_path, value, full_path):
  """Sets `message.<dotted_path> = value`, checking the path and the type."""
  head, _, rest = dotted_path.partition('.')
  field = message.DESCRIPTOR.fields_by_name.get(head)
  if field is None:
    raise ValueError("override '%s': %s has no field '%s'" %
                     (full_path, message.DESCRIPTOR.full_name, head))
  is_repeated = field.is_repeated
  if rest:
    if field.type != descriptor_lib.FieldDescriptor.TYPE_MESSAGE or is_repeated:
      raise ValueError("override '%s': '%s' is not a single message field" %
                       (full_path, head))
    _set_field(getattr(message, head), rest, value, full_path)
    return
  try:
    if is_repeated:
      container = getattr(message, head)
      del container[:]
      container.extend(value if isinstance(value, (list, tuple)) else [value])
    elif field.type == descriptor_lib.FieldDescriptor.TYPE_MESSAGE:
      getattr(message, head).CopyFrom(value)
    elif field.type == descriptor_lib.FieldDescriptor.TYPE_ENUM and isinstance(value, str):
      setattr(message, head, field.enum_type.values_by_name[value].number)
    else:
      setattr(message, head, value)
  except (TypeError, ValueError, KeyError) as e:
    raise ValueError("override '%s': bad value %r (%s)" % (full_path, value, e)) from None


def apply_overrides(pipeline_config, config_override=None, overrides=None):
  """Applies overrides to a pipeline config in place.

  Args:
    pipeline_config: a TrainEvalPipelineConfig.
    config_override: optional text-format TrainEvalPipelineConfig merged on
      top (set fields replace, repeated fields append), as the OD API does.
    overrides: optional dict {'train_config.num_steps': 100, ...} of dotted
      field paths to values; a repeated field takes a list.

  Returns:
    The same `pipeline_config`.

  Raises:
    ValueError: naming the override that does not fit the config.
  """
  if config_override:
    try:
      text_format.Merge(config_override, pipeline_config)
    except text_format.ParseError as e:
      raise _parse_error('config_override', config_override, e) from None
  for path, value in (overrides or {}).items():
    _set_field(pipeline_config, path, value, path)
  return pipeline_config


def create_configs_from_pipeline_proto(pipeline_config):
  """Splits a pipeline proto into the OD API's dict of configs.

  Returns:
    A dict with keys 'model', 'train_config', 'train_input_config',
    'eval_config', 'eval_input_configs' (list), 'eval_input_config' (the
    first, as the 2017/2018 eval.py reads it, or an empty InputReader) and
    'deploy_config'; plus 'graph_rewriter_config' only when the pipeline has a
    `graph_rewriter` (as the OD API: programs test `'graph_rewriter_config' in configs`).
  """
  eval_inputs = list(pipeline_config.eval_input_reader)
  configs = {
      'model': pipeline_config.model,
      'train_config': pipeline_config.train_config,
      'train_input_config': pipeline_config.train_input_reader,
      'eval_config': pipeline_config.eval_config,
      'eval_input_configs': eval_inputs,
      'eval_input_config': (eval_inputs[0] if eval_inputs else
                            type(pipeline_config.train_input_reader)()),
      'deploy_config': pipeline_config.deploy_config,
  }
  if pipeline_config.HasField('graph_rewriter'):
    configs['graph_rewriter_config'] = pipeline_config.graph_rewriter
  return configs


def create_pipeline_proto_from_configs(configs):
  """Inverse of `create_configs_from_pipeline_proto`."""
  pipeline_config = pipeline_pb2.TrainEvalPipelineConfig()
  # configs key -> pipeline field; deploy_config is optional (older dicts lack it).
  for key, field in (('model', 'model'), ('train_config', 'train_config'),
                     ('train_input_config', 'train_input_reader'),
                     ('eval_config', 'eval_config'), ('deploy_config', 'deploy_config')):
    if key != 'deploy_config' or key in configs:
      getattr(pipeline_config, field).CopyFrom(configs[key])
  pipeline_config.eval_input_reader.extend(configs.get('eval_input_configs', []))
  if 'graph_rewriter_config' in configs:
    pipeline_config.graph_rewriter.CopyFrom(configs['graph_rewriter_config'])
  return pipeline_config


def get_configs_from_pipeline_file(pipeline_config_path, config_override=None,
                                   overrides=None, required_sections=()):
  """Loads a pipeline config file, applies overrides, checks sections.

  Args:
    pipeline_config_path: path of a text-format TrainEvalPipelineConfig.
    config_override: optional text-format overrides (see apply_overrides).
    overrides: optional dotted-path overrides (see apply_overrides).
    required_sections: names of top-level fields that must be set, e.g.
      `TRAIN_SECTIONS`.

  Returns:
    The dict of `create_configs_from_pipeline_proto`.
  """
  pipeline_config = load_pipeline_config(pipeline_config_path)
  apply_overrides(pipeline_config, config_override, overrides)
  check_required_sections(pipeline_config, required_sections, pipeline_config_path)
  return create_configs_from_pipeline_proto(pipeline_config)


def check_label_maps(configs):
  """Checks that every label map of the input readers fits the model's num_classes.

  Args:
    configs: the dict of `create_configs_from_pipeline_proto`.

  Raises:
    ValueError: from `label_map_util.check_ids_within`, naming the label map
      file and the id above num_classes.
  """
  kind = configs['model'].WhichOneof('model')
  if kind is None:
    return
  num_classes = getattr(configs['model'], kind).num_classes
  readers = [configs['train_input_config']] + list(configs.get('eval_input_configs', []))
  for path in sorted({r.label_map_path for r in readers if r.label_map_path}):
    label_map_util.check_ids_within(path, num_classes)


def save_pipeline_config(pipeline_config, directory):
  """Writes `directory/pipeline.config` atomically (temp file, then rename).

  A `pipeline.config` already there with different content (an earlier run
  with another config) is kept as `pipeline.config.<UTC time>` and the
  difference is logged as a warning; identical content is just rewritten.
  Paths go through tf.io.gfile, so `gs://` and other TF filesystems work, and
  the file gets the umask's permissions.

  Returns:
    The path written.
  """
  paths.makedirs(directory)
  path = paths.join(directory, PIPELINE_CONFIG_NAME)
  text = text_format.MessageToString(pipeline_config)
  _keep_a_different_previous_config(path, text)
  logging.info('Writing pipeline config file to %s', path)
  return paths.write_file_atomically(path, text)


def _keep_a_different_previous_config(path, new_text):
  """Renames an existing `path` whose content differs from `new_text`; logs the diff."""
  if not paths.exists(path):
    return
  old_text = paths.read_text(path)
  if old_text == new_text:
    return
  kept = '%s.%s' % (path, time.strftime('%Y%m%d-%H%M%S', time.gmtime()))
  while paths.exists(kept):
    kept += '_'
  tf.io.gfile.rename(path, kept)
  diff = difflib.unified_diff(old_text.splitlines(), new_text.splitlines(),
                              kept, path, lineterm='', n=1)
  logging.warning('%s differs from the config of an earlier run, kept as %s:\n%s',
                  path, kept, '\n'.join(diff))


# ---------------------------------------------------------------------------
# The OD API's keyword overrides (model_lib's **kwargs).

# keyword -> (configs key, field path) pairs it sets; 'eval_input_configs' means each one.
_EXTERNAL_PARAMS = {
    'train_steps': [('train_config', 'num_steps')],
    'batch_size': [('train_config', 'batch_size')],
    'use_bfloat16': [('train_config', 'use_bfloat16')],
    'train_shuffle': [('train_input_config', 'shuffle')],
    'eval_shuffle': [('eval_input_configs', 'shuffle')],
    'train_input_path': [('train_input_config', 'tf_record_input_reader.input_path')],
    'eval_input_path': [('eval_input_configs', 'tf_record_input_reader.input_path')],
    'label_map_path': [('train_input_config', 'label_map_path'),
                       ('eval_input_configs', 'label_map_path')],
    'mask_type': [('train_input_config', 'mask_type'), ('eval_input_configs', 'mask_type')],
    'max_number_of_boxes': [('train_config', 'max_number_of_boxes'),
                            ('train_input_config', 'max_number_of_boxes'),
                            ('eval_input_configs', 'max_number_of_boxes')],
    'eval_num_epochs': [('eval_input_configs', 'num_epochs')],
    'sample_1_of_n_eval_examples': [('eval_input_configs', 'sample_1_of_n_examples')],
    'eval_with_moving_averages': [('eval_config', 'use_moving_averages')],
    'retain_original_images_in_eval': [('eval_config', 'retain_original_images')],
}
# Pipeline field names accepted as the first part of a dotted key, beside the configs keys.
_PIPELINE_SECTION_KEYS = {'train_input_reader': 'train_input_config',
                          'eval_input_reader': 'eval_input_configs'}


def _messages(configs, section):
  value = configs[section]
  return list(value) if section == 'eval_input_configs' else [value]


def _set_learning_rate(optimizer, value, key):
  """Sets the initial rate of the optimizer's schedule, scaling the rates tied to it."""
  rate = optimizer.learning_rate
  kind = rate.WhichOneof('learning_rate')
  if kind == 'constant_learning_rate':
    rate.constant_learning_rate.learning_rate = value
  elif kind == 'exponential_decay_learning_rate':
    rate.exponential_decay_learning_rate.initial_learning_rate = value
  elif kind == 'manual_step_learning_rate':
    schedule = rate.manual_step_learning_rate
    scale = value / schedule.initial_learning_rate if schedule.initial_learning_rate else 1.0
    schedule.initial_learning_rate = value
    for step in schedule.schedule:
      step.learning_rate *= scale
  elif kind == 'cosine_decay_learning_rate':
    schedule = rate.cosine_decay_learning_rate
    scale = value / schedule.learning_rate_base if schedule.learning_rate_base else 1.0
    schedule.learning_rate_base = value
    schedule.warmup_learning_rate *= scale
  else:
    raise ValueError("override '%s': the optimizer has no learning rate schedule (%s)"
                     % (key, kind))


def _set_optimizer_param(train_config, key, value):
  kind = train_config.optimizer.WhichOneof('optimizer')
  if kind is None:
    raise ValueError("override '%s': train_config.optimizer names no optimizer" % key)
  optimizer = getattr(train_config.optimizer, kind)
  if key == 'learning_rate':
    _set_learning_rate(optimizer, float(value), key)
  elif 'momentum_optimizer_value' in optimizer.DESCRIPTOR.fields_by_name:
    optimizer.momentum_optimizer_value = min(max(float(value), 0.0), 1.0)
  else:
    raise ValueError("override '%s': %s has no momentum" % (key, kind))


def merge_external_params_with_configs(configs, hparams=None, kwargs_dict=None):
  """Applies the OD API's keyword overrides (`batch_size=...`) to a configs dict.

  Args:
    configs: the dict of `create_configs_from_pipeline_proto` (changed in place).
    hparams: accepted for the OD signature; its values configure the model_fn
      (`load_pretrained`), not the configs.
    kwargs_dict: {keyword: value}; a keyword of `_EXTERNAL_PARAMS`, `learning_rate`,
      `momentum_optimizer_value`, or a dotted path whose first part is a key of
      `configs` (`'train_config.num_steps'`, `'eval_input_configs.shuffle'`: every eval
      input) or a pipeline section (`'train_input_reader.shuffle'`).

  Returns:
    `configs`.

  Raises:
    ValueError: an unknown keyword or path (naming it), or a value the field cannot take.
  """
  del hparams
  for key, value in (kwargs_dict or {}).items():
    if value is None:
      continue
    if key in ('learning_rate', 'momentum_optimizer_value'):
      _set_optimizer_param(configs['train_config'], key, value)
      continue
    if key in _EXTERNAL_PARAMS:
      targets = _EXTERNAL_PARAMS[key]
    elif '.' in key:
      section, _, rest = key.partition('.')
      section = _PIPELINE_SECTION_KEYS.get(section, section)
      if section not in configs or section == 'eval_input_config':
        raise ValueError("override '%s': no config section '%s' (one of %s)"
                         % (key, key.partition('.')[0], sorted(configs)))
      targets = [(section, rest)]
    else:
      raise ValueError("unknown config override keyword '%s'; use one of %s, "
                       "learning_rate, momentum_optimizer_value or a dotted path such "
                       "as 'train_config.num_steps'" % (key, sorted(_EXTERNAL_PARAMS)))
    for section, path in targets:
      for message in _messages(configs, section):
        _set_field(message, path, value, key)
  return configs
