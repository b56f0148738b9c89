"""Every mapping in docs/migrating.md names something that exists, with the call shape it promises.

The test reads each table row of docs/migrating.md (`| old | new |`) and

1. resolves every name in the row's new column: Python names (`tfe.X`,
   `core.m.f`, `slim.f`, `deployment.model_deploy`), commands
   (`python -m trainer.train`) and their flags (`--train_dir`), pipeline
   config fields (`train_config.batch_size`); a row naming something that
   does not exist fails;
2. runs the row's own check from `ROW_CHECKS`, keyed by the first name in
   the new column (or the cell's text when it has none). A row that spells
   out the call it promises needs no entry: when the new column's first name
   is a call (`core.m.f(a, b=1)`), or it says "same arguments" beside an old
   call (`tf.estimator.f(a, b=1)`), that call must bind to the new name by
   position and by keyword, with the same defaults (`_check_documented_call`).
   Any other row without an entry fails, so a new row comes with its check:
   one entry, e.g.

       'tfe.Foo': lambda: _params(tfe.Foo, 'estimator', 'name', 'threshold'),

   Most checks compare the leading parameter names with the original's
   (the call shape a ported call relies on); some make a small call the way
   the old code did.
"""

import ast
import inspect
import importlib
import os
import re
import sys
import tempfile

import pytest
import tensorflow as tf

from trainer import estimator as tfe  # noqa: F401  (imports core.compat first)

import tf_slim as slim  # noqa: E402
from protos import pipeline_pb2  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIGRATING = os.path.join(REPO_ROOT, 'docs', 'migrating.md')

# How docs/migrating.md abbreviates packages.
_ALIASES = {'tfe': 'estimator', 'slim': 'tf_slim'}
_PYTHON_ROOTS = ('tfe', 'slim', 'tf_slim', 'core', 'trainer', 'builders', 'deployment', 'protos',
                 'utils')
_IDENTIFIER_PATH = re.compile(r'^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$')


# -- reading the tables ----------------------------------------------------------------

def _rows():
  """(section, old cell, new cell) for every table row of docs/migrating.md."""
  section, rows = '', []
  with open(MIGRATING) as f:
    lines = f.read().splitlines()
  for i, line in enumerate(lines):
    if line.startswith('#'):
      section = line.lstrip('#').strip()
    if not line.startswith('|'):
      continue
    if re.match(r'^\|\s*-+', line):
      continue
    if i + 1 < len(lines) and re.match(r'^\|\s*-+', lines[i + 1]):
      continue  # the header
    cells = [cell.strip() for cell in line.strip().strip('|').split(' | ')]
    assert len(cells) == 2, 'docs/migrating.md row without two cells: %s' % line
    rows.append((section, cells[0], cells[1]))
  return rows


def _names(cell):
  return re.findall(r'`([^`]+)`', cell)


def _row_key(new_cell):
  names = _names(new_cell)
  return names[0] if names else new_cell


# -- resolving names -------------------------------------------------------------------

def _resolve_python(path):
  """The object a dotted name (`tfe.export.PredictOutput`) names; fails if there is none."""
  parts = path.split('.')
  parts[0] = _ALIASES.get(parts[0], parts[0])
  parts = '.'.join(parts).split('.')
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module('.'.join(parts[:i]))
    except ImportError:
      continue
    for attr in parts[i:]:
      assert hasattr(obj, attr), '%s: %r has no attribute %r' % (path, obj, attr)
      obj = getattr(obj, attr)
    return obj
  raise AssertionError('%s: no importable module in it' % path)


_FLAG_KINDS = ('string', 'integer', 'boolean', 'bool', 'float', 'enum', 'list', 'multi_string')


def _constant(node):
  return node.value if isinstance(node, ast.Constant) else None


def _defined_flags(module_name):
  """The absl flag names a command module defines, read from its source.

  The commands define their flags in `define_flags()` (several share names,
  so defining them in one process would clash): as `flags.DEFINE_x('name',
  ...)` calls, or as `('x', 'name', default, help)` tuples of a table.
  """
  module = importlib.import_module(module_name)
  with open(module.__file__) as f:
    tree = ast.parse(f.read())
  names = set()
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
        node.func.attr.startswith('DEFINE_') and node.args and _constant(node.args[0])):
      names.add(_constant(node.args[0]))
    elif (isinstance(node, ast.Tuple) and len(node.elts) >= 2 and
          _constant(node.elts[0]) in _FLAG_KINDS and isinstance(_constant(node.elts[1]), str)):
      names.add(_constant(node.elts[1]))
  return names


def _proto_field(path):
  """Resolves `train_config.optimizer` in TrainEvalPipelineConfig; fails if a field is missing."""
  descriptor = pipeline_pb2.TrainEvalPipelineConfig.DESCRIPTOR
  for name in path.split('.'):
    assert descriptor is not None, '%s: %s is not a message' % (path, name)
    assert name in descriptor.fields_by_name, '%s: no field %r in %s' % (
        path, name, descriptor.full_name)
    descriptor = descriptor.fields_by_name[name].message_type
  return descriptor


# The command-line programs; a flag named without its command belongs to one of them.
_COMMANDS = ['trainer.train', 'trainer.eval', 'trainer.export', 'trainer.model_main']
_PIPELINE_FIELDS = set(pipeline_pb2.TrainEvalPipelineConfig.DESCRIPTOR.fields_by_name)


def _resolve_cell(section, new_cell):
  """Resolves each name of a new-column cell whose kind is recognisable."""
  command = 'trainer.train' if 'train_image_classifier' in section else None
  for name in _names(new_cell):
    name = name.split('(')[0].strip()
    if name.startswith('python -m '):
      command = name.split()[2]
      importlib.import_module(command)
    elif name.startswith('--'):
      commands = [command] if command else _COMMANDS
      assert any(name[2:] in _defined_flags(c) for c in commands), (
          '%s do not define %s' % (commands, name))
    elif name.startswith('import '):
      exec(name, {})  # pylint: disable=exec-used
    elif _IDENTIFIER_PATH.match(name) and '.' in name:
      root = name.split('.')[0]
      if root in _PIPELINE_FIELDS:
        _proto_field(name)
      elif root in _PYTHON_ROOTS:
        _resolve_python(name)


_CALL = re.compile(r'^([A-Za-z_][\w.]*)\((.*)\)$')


def _documented_call(old_cell, new_cell):
  """(new name, parameter text) of the call a row spells out, else None."""
  new_names = _names(new_cell)
  call = _CALL.match(new_names[0]) if new_names else None
  if call and call.group(2) not in ('', '...'):
    return call.group(1), call.group(2)
  old_names = _names(old_cell)
  old_call = _CALL.match(old_names[0]) if old_names else None
  if new_names and old_call and 'same arguments' in new_cell and old_call.group(2) != '...':
    return new_names[0], old_call.group(2)
  return None


def _documented_default(node, function):
  """A default as the row writes it: a literal, or a name of the function's module, tf or tfe."""
  try:
    return ast.literal_eval(node)
  except ValueError:
    scope = dict(vars(sys.modules[function.__module__]), tf=tf, tfe=tfe)
    return eval(ast.unparse(node), scope)  # pylint: disable=eval-used


def _check_documented_call(name, parameters):
  """The call `name(parameters)` binds as written, with the written defaults.

  A trailing `...` in `parameters` means "and more": only the parameters
  written are checked; a default written `...` is not compared.
  """
  function = _resolve_python(name)
  if inspect.isclass(function):
    function = function.__init__
  signature = inspect.signature(function)
  parameters = re.sub(r',\s*\.\.\.\s*$', '', parameters)
  documented = ast.parse('def f(%s): pass' % parameters).body[0].args
  required = [a.arg for a in documented.args[:len(documented.args) - len(documented.defaults)]]
  bound_self = ['self'] if 'self' in signature.parameters else []
  # Required arguments by position, as an old call passes them...
  signature.bind(*(bound_self + required))
  # ... and every documented parameter by keyword.
  keywords = {a.arg: None for a in documented.args}
  if documented.kwarg:
    keywords['some_override'] = 1
    assert any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()), name
  signature.bind(*bound_self, **keywords)
  for argument, default in zip(documented.args[len(required):], documented.defaults):
    if isinstance(default, ast.Constant) and default.value is Ellipsis:
      continue
    actual = signature.parameters[argument.arg].default
    assert actual == _documented_default(default, function), (
        '%s: %s defaults to %r, the row says %s' % (
            name, argument.arg, actual, ast.unparse(default)))


# -- the row checks --------------------------------------------------------------------

def _params(fn, *names):
  """fn's leading parameters are `names`, in order (the positional call shape)."""
  if inspect.isclass(fn):
    fn = fn.__new__ if fn.__init__ is object.__init__ else fn.__init__
  got = [p for p in inspect.signature(fn).parameters if p not in ('self', 'cls')]
  assert got[:len(names)] == list(names), '%s: parameters %s, expected to start with %s' % (
      getattr(fn, '__qualname__', fn), got, list(names))


def _has(obj, *attributes):
  for attribute in attributes:
    assert hasattr(obj, attribute), '%r has no %s' % (obj, attribute)


def _fields(message_path, *names):
  descriptor = _proto_field(message_path)
  for name in names:
    assert name in descriptor.fields_by_name, '%s has no field %s' % (message_path, name)


def _columns():
  return [tf.compat.v1.feature_column.numeric_column('x', shape=[2])]


def _check_hparams():
  hparams = tfe.HParams(learning_rate=0.1, layers=[2, 3], name='a')
  hparams.parse('learning_rate=0.5,layers=[4]')
  hparams.override_from_dict({'name': 'b'})
  assert hparams.values() == {'learning_rate': 0.5, 'layers': [4], 'name': 'b'}
  copy = tfe.HParams(learning_rate=0.0, layers=[1], name='').parse_json(hparams.to_json())
  assert copy.get('layers') == [4]
  hparams.add_hparam('depth', 3)
  hparams.set_hparam('depth', 4)
  hparams.del_hparam('name')
  assert hparams.values() == {'learning_rate': 0.5, 'layers': [4], 'depth': 4}


def _check_contrib_filter_variables():
  with tf.Graph().as_default():
    variables = [tf.compat.v1.Variable(0.0, name=name)
                 for name in ('Conv1/weights', 'Conv1/biases', 'Logits/weights', 'fc/weights')]
    kept = slim.filter_variables(variables, include_patterns=['Conv', 'Logits'],
                                 exclude_patterns=['biases', 'Logits'], reg_search=True)
    assert [v.op.name for v in kept] == ['Conv1/weights']
    assert slim.filter_variables(variables, ['weights'], reg_search=False) == []


def _check_contrib_mode_keys():
  from estimator import learn  # pylint: disable=import-outside-toplevel
  assert (learn.ModeKeys.TRAIN, learn.ModeKeys.EVAL, learn.ModeKeys.INFER) == (
      tfe.ModeKeys.TRAIN, tfe.ModeKeys.EVAL, tfe.ModeKeys.PREDICT)


def _check_learn_namespace():
  from estimator import learn  # pylint: disable=import-outside-toplevel
  assert learn.Experiment is tfe.Experiment and issubclass(learn.RunConfig, tfe.RunConfig)
  _params(learn.learn_runner.run, 'experiment_fn', 'output_dir', 'schedule', 'run_config',
          'hparams')
  _check_contrib_mode_keys()


def _check_contrib_run_config():
  from estimator import learn  # pylint: disable=import-outside-toplevel
  _params(learn.RunConfig, 'master', 'num_cores', 'log_device_placement', 'gpu_memory_fraction',
          'tf_random_seed', 'save_summary_steps', 'save_checkpoints_secs',
          'save_checkpoints_steps', 'keep_checkpoint_max', 'keep_checkpoint_every_n_hours',
          'log_step_count_steps', 'protocol', 'evaluation_master', 'model_dir', 'session_config')
  config = learn.RunConfig(num_cores=2, model_dir='/tmp/unused', save_checkpoints_steps=10)
  assert config.session_config.intra_op_parallelism_threads == 2


def _check_run_config_clones():
  config = tfe.RunConfig(num_clones=2, clone_on_cpu=True)
  assert (config.num_clones, config.clone_on_cpu) == (2, True)
  _params(tfe.RunConfig, 'model_dir', 'tf_random_seed', 'save_summary_steps',
          'save_checkpoints_steps', 'save_checkpoints_secs', 'session_config',
          'keep_checkpoint_max', 'keep_checkpoint_every_n_hours', 'log_step_count_steps')


def _check_tower_optimizer():
  optimizer = tfe.TowerOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
  _has(optimizer, 'compute_gradients', 'apply_gradients', 'minimize')


def _check_model_deploy():
  from deployment import model_deploy  # pylint: disable=import-outside-toplevel
  _params(model_deploy.DeploymentConfig, 'num_clones', 'clone_on_cpu', 'replica_id',
          'num_replicas', 'num_ps_tasks', 'worker_job_name', 'ps_job_name')
  _params(model_deploy.create_clones, 'config', 'model_fn', 'args', 'kwargs')
  _params(model_deploy.optimize_clones, 'clones', 'optimizer', 'regularization_losses')
  _params(model_deploy.deploy, 'config', 'model_fn', 'args', 'kwargs', 'optimizer',
          'summarize_gradients')


def _check_stop_hooks():
  for name, third in (('stop_if_no_decrease_hook', 'max_steps_without_decrease'),
                      ('stop_if_no_increase_hook', 'max_steps_without_increase'),
                      ('stop_if_higher_hook', 'threshold'), ('stop_if_lower_hook', 'threshold')):
    _params(getattr(tfe.experimental, name), 'estimator', 'metric_name', third, 'eval_dir',
            'min_steps', 'run_every_secs', 'run_every_steps')


def _check_exporters():
  _params(tfe.FinalExporter, 'name', 'serving_input_receiver_fn', 'assets_extra', 'as_text')
  _params(tfe.LatestExporter, 'name', 'serving_input_receiver_fn', 'assets_extra', 'as_text',
          'exports_to_keep')
  _params(tfe.BestExporter, 'name', 'serving_input_receiver_fn', 'event_file_pattern',
          'compare_fn', 'assets_extra', 'as_text', 'exports_to_keep')


def _check_export_outputs():
  _params(tfe.export.PredictOutput, 'outputs')
  _params(tfe.export.ClassificationOutput, 'scores', 'classes')
  _params(tfe.export.RegressionOutput, 'value')


def _check_canned(cls, *names):
  def check():
    _params(cls, *names)
  return check


_LINEAR_CLASSIFIER = ('feature_columns', 'model_dir', 'n_classes', 'weight_column',
                      'label_vocabulary', 'optimizer', 'config', 'warm_start_from',
                      'loss_reduction', 'sparse_combiner')
_LINEAR_REGRESSOR = ('feature_columns', 'model_dir', 'label_dimension', 'weight_column',
                     'optimizer', 'config', 'warm_start_from', 'loss_reduction',
                     'sparse_combiner')
_DNN_CLASSIFIER = ('hidden_units', 'feature_columns', 'model_dir', 'n_classes', 'weight_column',
                   'label_vocabulary', 'optimizer', 'activation_fn', 'dropout', 'config',
                   'warm_start_from', 'loss_reduction', 'batch_norm')
_DNN_REGRESSOR = ('hidden_units', 'feature_columns', 'model_dir', 'label_dimension',
                  'weight_column', 'optimizer', 'activation_fn', 'dropout', 'config',
                  'warm_start_from', 'loss_reduction', 'batch_norm')
_COMBINED = ('model_dir', 'linear_feature_columns', 'linear_optimizer', 'dnn_feature_columns',
             'dnn_optimizer', 'dnn_hidden_units', 'dnn_activation_fn', 'dnn_dropout')


def _check_canned_linear_classifier():
  _params(tfe.LinearClassifier, *_LINEAR_CLASSIFIER)
  estimator = tfe.LinearClassifier(_columns(), model_dir=None, n_classes=3, optimizer='Ftrl',
                                   config=tfe.RunConfig(model_dir='unused_model_dir'))
  assert isinstance(estimator, tfe.Estimator) and estimator.model_dir == 'unused_model_dir'


def _check_mode_keys():
  assert (tfe.ModeKeys.TRAIN, tfe.ModeKeys.EVAL, tfe.ModeKeys.PREDICT) == (
      'train', 'eval', 'infer')


def _check_keras():
  _params(tfe.keras.model_to_estimator, 'keras_model', 'keras_model_path', 'custom_objects',
          'model_dir', 'config', 'checkpoint_format', 'metric_names_map', 'export_outputs')


def _check_command(module_name, *flag_names):
  def check():
    flags = _defined_flags(module_name)
    missing = [name for name in flag_names if name not in flags]
    assert not missing, '%s lacks flags %s' % (module_name, missing)
    _has(importlib.import_module(module_name), 'main')
  return check


def _check_export_layout():
  from trainer import exporter  # pylint: disable=import-outside-toplevel
  with open(exporter.__file__) as f:
    source = f.read()
  assert 'frozen_inference_graph.pb' in source and 'model.ckpt' in source


def _check_detection_model():
  from core import model  # pylint: disable=import-outside-toplevel
  _has(model.DetectionModel, 'preprocess', 'predict', 'postprocess', 'loss', 'restore_map',
       'provide_groundtruth', 'groundtruth_lists', 'num_classes')


def _check_standard_fields():
  from core import standard_fields  # pylint: disable=import-outside-toplevel
  _has(standard_fields, 'InputDataFields', 'DetectionResultFields', 'BoxListFields')
  assert standard_fields.InputDataFields.image == 'image'


def _check_optimizer_fields():
  _fields('train_config.optimizer', 'momentum_optimizer', 'adam_optimizer',
          'rms_prop_optimizer', 'sgd_optimizer', 'use_moving_average', 'moving_average_decay')
  _fields('train_config.optimizer.momentum_optimizer.learning_rate', 'constant_learning_rate',
          'exponential_decay_learning_rate', 'manual_step_learning_rate',
          'cosine_decay_learning_rate')


def _check_fine_tune_type():
  _fields('train_config', 'from_detection_checkpoint', 'fine_tune_checkpoint_type',
          'fine_tune_checkpoint')


def _py(module_name):
  return lambda name: _resolve_python('%s.%s' % (module_name, name))


# Keyed by the first name of the row's new column. The call shapes are the originals'.
def _same_classes(*names):
  """Each `tfe.<name>` is TF's own `tf.compat.v1.train.<name>`, as tf.estimator exported it."""
  for name in names:
    assert getattr(tfe, name) is getattr(tf.compat.v1.train, name), name


def _check_od_variables_helper():
  from core import variables_helper  # pylint: disable=import-outside-toplevel
  from utils import variables_helper as od_variables_helper  # pylint: disable=import-outside-toplevel
  for name in ('filter_variables', 'multiply_gradients_matching_regex',
               'freeze_gradients_matching_regex', 'get_variables_available_in_checkpoint'):
    assert getattr(od_variables_helper, name) is getattr(variables_helper, name), name


# -- tf.distribute strategies given to RunConfig (estimator/distribute.py) --------------

_TWO_CPUS = ['/cpu:0', '/cpu:1']


def _placement(strategy, argument):
  from estimator import distribute  # pylint: disable=import-outside-toplevel
  return distribute.placement(strategy, argument)


def _check_one_device_strategy():
  strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
  config = tfe.RunConfig(train_distribute=strategy)
  assert config.train_distribute is strategy
  assert (config.num_clones, config.clone_on_cpu) == (1, False)  # Trained as without one.
  assert _placement(strategy, 'train_distribute').devices == ('/device:CPU:0',)


def _check_mirrored_strategy():
  from estimator import distribute  # pylint: disable=import-outside-toplevel
  strategy = tf.distribute.MirroredStrategy(devices=_TWO_CPUS)
  config = tfe.RunConfig(train_distribute=strategy)
  assert config.train_distribute is strategy
  assert (config.num_clones, config.clone_on_cpu) == (2, True)  # CPU devices: CPU clones.
  deployment = config.deployment_config
  assert [deployment.clone_device(i) for i in range(2)] == ['/device:CPU:0', '/device:CPU:1']
  where = _placement(strategy, 'train_distribute')
  assert distribute.input_context(where).num_replicas_in_sync == 2
  gpus = _placement(tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1']),
                    'train_distribute')
  with pytest.raises(ValueError, match='needs those GPUs'):  # What train() checks first.
    distribute.check_devices(gpus, num_gpus=0)


def _check_mirrored_strategy_without_num_gpus():
  with pytest.raises(TypeError, match='num_gpus'):
    tf.distribute.MirroredStrategy(num_gpus=2)  # pylint: disable=unexpected-keyword-arg
  n = 2
  strategy = tf.distribute.MirroredStrategy(devices=['/gpu:%d' % i for i in range(n)])
  config = tfe.RunConfig(train_distribute=strategy)
  clones = tfe.RunConfig(num_clones=n)
  assert (config.num_clones, config.clone_on_cpu) == (clones.num_clones, clones.clone_on_cpu)


def _check_eval_distribute():
  from estimator import distribute  # pylint: disable=import-outside-toplevel
  for strategy in (tf.distribute.OneDeviceStrategy('/cpu:1'),
                   tf.distribute.MirroredStrategy(devices=['/cpu:1', '/cpu:0'])):
    config = tfe.RunConfig(eval_distribute=strategy)
    assert config.eval_distribute is strategy and config.num_clones == 1
    where = _placement(config.eval_distribute, 'eval_distribute')
    assert where.device == '/device:CPU:1'  # The strategy's first device.
    # evaluate() reads one batch per step: the input_fn's context has one replica.
    assert distribute.input_context(where, 1).num_replicas_in_sync == 1


def _check_refused(make, class_name, *advice):
  def check():
    strategy = make()
    for argument in ('train_distribute', 'eval_distribute'):
      with pytest.raises(ValueError) as error:
        tfe.RunConfig(**{argument: strategy})
      message = str(error.value)
      assert message.startswith('%s=%s' % (argument, class_name)), message
      for text in advice:
        assert text in message, (text, message)
  return check


def _check_sync_replicas_instead():
  _check_refused(tf.distribute.MultiWorkerMirroredStrategy, 'CollectiveAllReduceStrategy',
                 'MultiWorkerMirroredStrategy', 'deployment.sync_replicas.SyncReplicasOptimizer',
                 'train_config.sync_replicas: true')()
  _params(_resolve_python('deployment.sync_replicas.SyncReplicasOptimizer'), 'opt',
          'replicas_to_aggregate', 'total_num_replicas')
  _fields('train_config', 'sync_replicas', 'replicas_to_aggregate')


def _check_deprecated():
  scope = {}
  statement = 'from tensorflow.python.util.deprecation import deprecated'
  exec(statement, scope)  # pylint: disable=exec-used
  deprecated = scope['deprecated']
  _check_documented_call('tensorflow.python.util.deprecation.deprecated',
                         'date, instructions, warn_once=True')

  @deprecated('2018-01-01', 'Use something else.')
  def main():
    return 'ran'

  assert main() == 'ran' and 'Use something else.' in main.__doc__
  assert deprecated(None, 'Use something else.')(lambda: 1)() == 1
  with pytest.raises(ValueError):
    deprecated('January 2018', 'Use something else.')


# -- Object Detection API builders and configs ------------------------------------------

def _check_no_graph_quantization():
  from builders import graph_rewriter_builder  # pylint: disable=import-outside-toplevel
  from protos import graph_rewriter_pb2  # pylint: disable=import-outside-toplevel
  assert not hasattr(tf, 'contrib')
  # An empty `graph_rewriter {}` meant quantization with its defaults: refused too.
  with pytest.raises(ValueError, match=re.escape(
      'graph_rewriter.quantization (delay 500000, weight_bits 8, activation_bits 8)')):
    graph_rewriter_builder.build(graph_rewriter_pb2.GraphRewriter(), is_training=True)


def _check_graph_rewriter_builder():
  from builders import graph_rewriter_builder  # pylint: disable=import-outside-toplevel
  from protos import graph_rewriter_pb2  # pylint: disable=import-outside-toplevel
  _check_documented_call('builders.graph_rewriter_builder.build',
                         'graph_rewriter_config, is_training')
  config = graph_rewriter_pb2.GraphRewriter()
  config.quantization.delay = 10
  for is_training in (True, False):
    with pytest.raises(ValueError, match=r'^graph_rewriter\.quantization \(delay 10, ') as error:
      graph_rewriter_builder.build(config, is_training)
    assert 'tf.lite.TFLiteConverter' in str(error.value)
  with pytest.raises(ValueError, match='graph_rewriter.quantization'):
    graph_rewriter_builder.check_configs({'graph_rewriter_config': config}, is_training=True)
  graph_rewriter_builder.check_configs({}, is_training=True)  # No graph_rewriter: no error.
  for module_name in ('trainer.train', 'trainer.eval', 'trainer.exporter', 'trainer.model_lib'):
    with open(importlib.import_module(module_name).__file__) as f:
      assert 'graph_rewriter_builder.' in f.read(), module_name


def _input_reader(tmp_dir):
  from protos import input_reader_pb2  # pylint: disable=import-outside-toplevel
  path = os.path.join(tmp_dir, 'empty.tfrecord')
  with tf.io.TFRecordWriter(path):
    pass
  config = input_reader_pb2.InputReader()
  config.tf_record_input_reader.input_path.append(path)
  return config


def _check_dataset_builder():
  from builders import dataset_builder  # pylint: disable=import-outside-toplevel
  _check_documented_call('builders.dataset_builder.build',
                         'input_reader_config, batch_size=None, transform_input_data_fn=None')
  with pytest.raises(ValueError, match='input_reader_config not of type'):
    dataset_builder.build('not an InputReader')
  with tempfile.TemporaryDirectory() as tmp_dir, tf.Graph().as_default():
    spec = dataset_builder.build(_input_reader(tmp_dir), batch_size=2).element_spec
  # A static batch dimension (the last partial batch dropped), boxes padded.
  assert spec['image'].shape[0] == 2
  assert spec['groundtruth_boxes'].shape.as_list()[::2] == [2, 4]
  assert spec['groundtruth_boxes'].shape[1] is not None


def _check_make_initializable_iterator():
  from builders import dataset_builder  # pylint: disable=import-outside-toplevel
  _params(dataset_builder.make_initializable_iterator, 'dataset')
  with tf.Graph().as_default():
    iterator = dataset_builder.make_initializable_iterator(tf.data.Dataset.range(3))
    assert iterator.initializer in tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.tables_initializer())
      assert session.run(iterator.get_next()) == 0


_PIPELINE_TEXT = """
train_input_reader { tf_record_input_reader { input_path: "train.tfrecord" } }
eval_input_reader { tf_record_input_reader { input_path: "eval_a.tfrecord" } }
eval_input_reader { tf_record_input_reader { input_path: "eval_b.tfrecord" } }
"""


def _check_config_keys():
  from core import config_util  # pylint: disable=import-outside-toplevel
  field = pipeline_pb2.TrainEvalPipelineConfig.DESCRIPTOR.fields_by_name['graph_rewriter']
  assert field.number == 6
  with tempfile.TemporaryDirectory() as tmp_dir:
    plain, quantized = (os.path.join(tmp_dir, name) for name in ('plain.config', 'q.config'))
    with open(plain, 'w') as f:
      f.write(_PIPELINE_TEXT)
    with open(quantized, 'w') as f:
      f.write(_PIPELINE_TEXT + 'graph_rewriter { quantization { delay: 10 } }\n')
    configs = config_util.get_configs_from_pipeline_file(plain)
    with_rewriter = config_util.get_configs_from_pipeline_file(quantized)
  assert [c.tf_record_input_reader.input_path[0] for c in configs['eval_input_configs']] == [
      'eval_a.tfrecord', 'eval_b.tfrecord']
  assert configs['eval_input_config'].tf_record_input_reader.input_path[0] == 'eval_a.tfrecord'
  assert 'graph_rewriter_config' not in configs
  assert with_rewriter['graph_rewriter_config'].quantization.delay == 10


def _check_create_hparams():
  from trainer import model_hparams, model_lib  # pylint: disable=import-outside-toplevel
  _check_documented_call('trainer.model_hparams.create_hparams', 'hparams_overrides=None')
  assert model_lib.create_hparams is model_hparams.create_hparams
  assert model_hparams.create_hparams().values() == {'load_pretrained': True}
  assert model_hparams.create_hparams('load_pretrained=false').load_pretrained is False


ROW_CHECKS = {
    # tf.estimator
    'tfe.Estimator': lambda: _params(tfe.Estimator, 'model_fn', 'model_dir', 'config', 'params',
                                     'warm_start_from'),
    'tfe.EstimatorSpec': lambda: _params(
        tfe.EstimatorSpec, 'mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops',
        'export_outputs', 'training_chief_hooks', 'training_hooks', 'scaffold',
        'evaluation_hooks', 'prediction_hooks'),
    'tfe.ModeKeys': _check_mode_keys,
    'tfe.RunConfig': _check_run_config_clones,
    # RunConfig(train_distribute=..., eval_distribute=...) with tf.distribute strategies.
    'tfe.RunConfig(train_distribute=tf.distribute.OneDeviceStrategy(d))':
        _check_one_device_strategy,
    'tfe.RunConfig(train_distribute=tf.distribute.MirroredStrategy(devices=[...]))':
        _check_mirrored_strategy,
    "tf.distribute.MirroredStrategy(devices=['/gpu:%d' % i for i in range(N)])":
        _check_mirrored_strategy_without_num_gpus,
    'tfe.RunConfig(eval_distribute=...)': _check_eval_distribute,
    'tfe.RunConfig(train_distribute=ParameterServerStrategy(...))': _check_refused(
        tf.compat.v1.distribute.experimental.ParameterServerStrategy, 'ParameterServerStrategy',
        "TF_CONFIG with 'ps' and 'worker' tasks"),
    'tfe.RunConfig(train_distribute=MultiWorkerMirroredStrategy(...))':
        _check_sync_replicas_instead,
    'tfe.RunConfig(train_distribute=CentralStorageStrategy(...))': lambda: [
        _check_refused(make, class_name, 'RunConfig(num_clones=N)', 'clone_on_cpu=True')()
        for make, class_name in ((tf.distribute.experimental.CentralStorageStrategy,
                                  'CentralStorageStrategy'),
                                 (tf.distribute.get_strategy, '_DefaultDistributionStrategy'))],
    'tfe.WarmStartSettings': lambda: _params(
        tfe.WarmStartSettings, 'ckpt_to_initialize_from', 'vars_to_warm_start',
        'var_name_to_vocab_info', 'var_name_to_prev_var_name'),
    'tfe.TrainSpec': lambda: (_params(tfe.TrainSpec, 'input_fn', 'max_steps', 'hooks'),
                              _params(tfe.EvalSpec, 'input_fn', 'steps', 'name', 'hooks',
                                      'exporters', 'start_delay_secs', 'throttle_secs')),
    'tfe.train_and_evaluate': lambda: _params(tfe.train_and_evaluate, 'estimator', 'train_spec',
                                              'eval_spec'),
    'tfe.Exporter': lambda: _has(tfe.Exporter, 'name', 'export'),
    'tfe.FinalExporter': _check_exporters,
    'tfe.export.ServingInputReceiver': lambda: _params(
        tfe.export.ServingInputReceiver, 'features', 'receiver_tensors',
        'receiver_tensors_alternatives'),
    'tfe.export.TensorServingInputReceiver': lambda: _params(
        tfe.export.TensorServingInputReceiver, 'features', 'receiver_tensors',
        'receiver_tensors_alternatives'),
    'tfe.export.build_raw_serving_input_receiver_fn': lambda: _params(
        tfe.export.build_raw_serving_input_receiver_fn, 'features', 'default_batch_size'),
    'tfe.export.build_parsing_serving_input_receiver_fn': lambda: _params(
        tfe.export.build_parsing_serving_input_receiver_fn, 'feature_spec',
        'default_batch_size'),
    'tfe.export.PredictOutput': _check_export_outputs,
    'tfe.experimental.stop_if_no_decrease_hook': _check_stop_hooks,
    'tfe.experimental.make_early_stopping_hook': lambda: _params(
        tfe.experimental.make_early_stopping_hook, 'estimator', 'should_stop_fn',
        'run_every_secs', 'run_every_steps'),
    'tfe.experimental.read_eval_metrics': lambda: _params(tfe.experimental.read_eval_metrics,
                                                          'eval_dir'),
    'tfe.inputs.numpy_input_fn': lambda: _params(
        tfe.inputs.numpy_input_fn, 'x', 'y', 'batch_size', 'num_epochs', 'shuffle',
        'queue_capacity', 'num_threads'),
    'tfe.inputs.pandas_input_fn': lambda: _params(
        tfe.inputs.pandas_input_fn, 'x', 'y', 'batch_size', 'num_epochs', 'shuffle',
        'queue_capacity', 'num_threads', 'target_column'),
    'tfe.keras.model_to_estimator': _check_keras,
    # Canned Estimators (tf.estimator 2.15's V2 classes).
    'tfe.LinearClassifier': _check_canned_linear_classifier,
    'tfe.LinearRegressor': _check_canned(tfe.LinearRegressor, *_LINEAR_REGRESSOR),
    'tfe.BaselineClassifier': _check_canned(
        tfe.BaselineClassifier, 'model_dir', 'n_classes', 'weight_column', 'label_vocabulary',
        'optimizer', 'config', 'loss_reduction'),
    'tfe.BaselineRegressor': _check_canned(
        tfe.BaselineRegressor, 'model_dir', 'label_dimension', 'weight_column', 'optimizer',
        'config', 'loss_reduction'),
    'tfe.DNNClassifier': _check_canned(tfe.DNNClassifier, *_DNN_CLASSIFIER),
    'tfe.DNNRegressor': _check_canned(tfe.DNNRegressor, *_DNN_REGRESSOR),
    'tfe.DNNLinearCombinedClassifier': _check_canned(
        tfe.DNNLinearCombinedClassifier, *_COMBINED, 'n_classes', 'weight_column',
        'label_vocabulary', 'config', 'warm_start_from', 'loss_reduction', 'batch_norm',
        'linear_sparse_combiner'),
    'tfe.DNNLinearCombinedRegressor': _check_canned(
        tfe.DNNLinearCombinedRegressor, *_COMBINED, 'label_dimension', 'weight_column',
        'config', 'warm_start_from', 'loss_reduction', 'batch_norm', 'linear_sparse_combiner'),
    # tf.contrib
    'tfe.HParams': _check_hparams,
    'tfe.Experiment': lambda: _params(
        tfe.Experiment, 'estimator', 'train_input_fn', 'eval_input_fn', 'eval_metrics',
        'train_steps', 'eval_steps', 'train_monitors', 'eval_hooks', 'local_eval_frequency',
        'eval_delay_secs', 'continuous_eval_throttle_secs', 'min_eval_frequency',
        'delay_workers_by_global_step', 'export_strategies', 'train_steps_per_iteration',
        'checkpoint_and_export', 'saving_listeners', 'check_interval_secs'),
    'tfe.learn_runner.run': lambda: _params(tfe.learn_runner.run, 'experiment_fn', 'output_dir',
                                            'schedule', 'run_config', 'hparams'),
    'tfe.learn.ModeKeys': _check_contrib_mode_keys,
    'tfe.learn.RunConfig': _check_contrib_run_config,
    'tfe.learn': _check_learn_namespace,
    'tfe.RunConfig(num_clones=N)': _check_run_config_clones,
    'tfe.TowerOptimizer(optimizer)': _check_tower_optimizer,
    'import tf_slim as slim': lambda: _has(slim, 'arg_scope', 'conv2d', 'learning', 'losses'),
    'deployment.model_deploy': _check_model_deploy,
    'slim.learning.train': lambda: _params(slim.learning.train, 'train_op', 'logdir'),
    'slim.filter_variables': _check_contrib_filter_variables,
    'from tensorflow.python.util.deprecation import deprecated': _check_deprecated,
    'builders.graph_rewriter_builder': _check_no_graph_quantization,
    # Object Detection API
    'python -m trainer.train': _check_command(
        'trainer.train', 'train_dir', 'pipeline_config_path', 'num_clones', 'clone_on_cpu',
        'master', 'task', 'worker_replicas', 'ps_tasks'),
    'python -m trainer.eval': _check_command(
        'trainer.eval', 'checkpoint_dir', 'eval_dir', 'pipeline_config_path', 'run_once',
        'eval_training_data'),
    'python -m trainer.export': _check_command(
        'trainer.export', 'input_type', 'pipeline_config_path', 'trained_checkpoint_prefix',
        'output_directory'),
    'python -m trainer.model_main': _check_command(
        'trainer.model_main', 'model_dir', 'pipeline_config_path', 'num_train_steps',
        'sample_1_of_n_eval_examples', 'checkpoint_dir', 'run_once', 'eval_training_data',
        'hparams_overrides'),
    'trainer.trainer.train(...)': lambda: _params(
        _resolve_python('trainer.trainer.train'), 'create_tensor_dict_fn', 'create_model_fn',
        'train_config', 'master', 'task', 'num_clones', 'worker_replicas', 'clone_on_cpu',
        'ps_tasks', 'worker_job_name', 'is_chief', 'train_dir', 'graph_hook_fn'),
    'trainer.evaluator.evaluate(...)': lambda: _params(
        _resolve_python('trainer.evaluator.evaluate'), 'create_input_dict_fn', 'create_model_fn',
        'eval_config', 'categories', 'checkpoint_dir', 'eval_dir', 'graph_hook_fn'),
    'trainer.exporter.export_inference_graph(...)': lambda: _params(
        _resolve_python('trainer.exporter.export_inference_graph'), 'input_type',
        'pipeline_config', 'trained_checkpoint_prefix', 'output_directory', 'input_shape'),
    '--serving_version': _check_export_layout,
    'trainer.model_lib.create_model_fn': lambda: _params(
        _resolve_python('trainer.model_lib.create_model_fn'), 'detection_model_fn', 'configs',
        'hparams', 'use_tpu'),
    'trainer.model_lib.create_estimator_and_inputs': lambda: _params(
        _resolve_python('trainer.model_lib.create_estimator_and_inputs'), 'run_config',
        'hparams', 'pipeline_config_path', 'config_override', 'train_steps',
        'sample_1_of_n_eval_examples', 'sample_1_of_n_eval_on_train_examples'),
    'trainer.model_lib.create_train_and_eval_specs': lambda: _params(
        _resolve_python('trainer.model_lib.create_train_and_eval_specs'), 'train_input_fn',
        'eval_input_fns', 'eval_on_train_input_fn', 'predict_input_fn', 'train_steps',
        'eval_on_train_data', 'final_exporter_name'),
    'trainer.model_lib.continuous_eval': lambda: _params(
        _resolve_python('trainer.model_lib.continuous_eval'), 'estimator', 'model_dir',
        'input_fn', 'train_steps', 'name'),
    'trainer.model_hparams.create_hparams(hparams_overrides=None)': _check_create_hparams,
    'core.config_util.get_configs_from_pipeline_file': lambda: _params(
        _resolve_python('core.config_util.get_configs_from_pipeline_file'),
        'pipeline_config_path', 'config_override'),
    'core.config_util.create_pipeline_proto_from_configs': lambda: _params(
        _resolve_python('core.config_util.create_pipeline_proto_from_configs'), 'configs'),
    'core.config_util.save_pipeline_config': lambda: _params(
        _resolve_python('core.config_util.save_pipeline_config'), 'pipeline_config',
        'directory'),
    'builders.optimizer_builder.build': lambda: _params(
        _resolve_python('builders.optimizer_builder.build'), 'optimizer_config'),
    'builders.model_builder.build': lambda: _params(
        _resolve_python('builders.model_builder.build'), 'model_config', 'is_training',
        'add_summaries'),
    'builders.preprocessor_builder.build': lambda: _params(
        _resolve_python('builders.preprocessor_builder.build'), 'preprocessor_step_config'),
    'builders.dataset_builder.build': _check_dataset_builder,
    'builders.dataset_builder.make_initializable_iterator': _check_make_initializable_iterator,
    'builders.graph_rewriter_builder.build': _check_graph_rewriter_builder,
    'core.config_util.get_configs_from_pipeline_file(pipeline_config_path)': _check_config_keys,
    'core.model.DetectionModel': _check_detection_model,
    'core.standard_fields': _check_standard_fields,
    'core.batcher.BatchQueue': lambda: _params(
        _resolve_python('core.batcher.BatchQueue'), 'tensor_dict', 'batch_size',
        'batch_queue_capacity', 'num_batch_queue_threads', 'prefetch_queue_capacity'),
    'core.variables_helper.get_variables_available_in_checkpoint': lambda: _params(
        _resolve_python('core.variables_helper.get_variables_available_in_checkpoint'),
        'variables', 'checkpoint_path', 'include_global_step'),
    'core.variables_helper.freeze_gradients_matching_regex': lambda: (
        _params(_resolve_python('core.variables_helper.freeze_gradients_matching_regex'),
                'grads_and_vars', 'regex_list'),
        _params(_resolve_python('core.variables_helper.multiply_gradients_matching_regex'),
                'grads_and_vars', 'regex_list', 'multiplier')),
    'train_config.fine_tune_checkpoint_type': _check_fine_tune_type,
    # TF-Slim train_image_classifier.py flags (names resolved by _resolve_cell).
    '--train_dir': lambda: None,
    'model.slim_classifier.net': lambda: None,
    'train_input_reader.tf_record_input_reader.input_path': lambda: None,
    'train_config.batch_size': lambda: None,
    '--num_clones': lambda: None,
    '--worker_replicas': lambda: None,
    'train_config.sync_replicas': lambda: None,
    'train_config.num_steps': lambda: None,
    'train_config.log_every_n_steps': lambda: None,
    'train_config.save_interval_secs': lambda: None,
    'train_config.optimizer': _check_optimizer_fields,
    'train_config.optimizer.use_moving_average': lambda: _fields('train_config.optimizer',
                                                                 'moving_average_decay'),
    'model.slim_classifier.weight_decay': lambda: None,
    'train_config.fine_tune_checkpoint': lambda: _fields('train_config',
                                                         'fine_tune_checkpoint_type'),
    'model.slim_classifier.checkpoint_exclude_scopes': lambda: None,
    'model.slim_classifier.trainable_scopes': lambda: None,
    'always on: variables missing from the checkpoint (or of another shape) are skipped and '
    'listed in a warning': lambda: None,
    # tf.estimator 2.15 names added with issue 26 C (the rows that spell a call are checked
    # by _check_documented_call).
    'tfe.SessionRunHook': lambda: _same_classes(
        'SessionRunHook', 'SessionRunArgs', 'SessionRunContext', 'SessionRunValues'),
    'tfe.LoggingTensorHook': lambda: _same_classes(
        'LoggingTensorHook', 'StopAtStepHook', 'CheckpointSaverHook', 'CheckpointSaverListener'),
    'tfe.StepCounterHook': lambda: _same_classes(
        'StepCounterHook', 'SummarySaverHook', 'NanTensorHook', 'FeedFnHook'),
    'tfe.ProfilerHook': lambda: _same_classes(
        'ProfilerHook', 'GlobalStepWaiterHook', 'FinalOpsHook', 'NanLossDuringTrainingError'),
    'tfe.VocabInfo': lambda: _same_classes('VocabInfo'),
    'tfe.experimental.build_raw_supervised_input_receiver_fn': lambda: [
        _check_documented_call(name, 'features, labels, default_batch_size=None')
        for name in ('tfe.experimental.build_raw_supervised_input_receiver_fn',
                     'tfe.export.build_raw_supervised_input_receiver_fn')],
    'tfe.export.EvalOutput': lambda: [
        _check_documented_call(name, 'loss=None, predictions=None, metrics=None')
        for name in ('tfe.export.EvalOutput', 'tfe.export.TrainOutput')],
    'tfe.Estimator.export_saved_model': lambda: _check_documented_call(
        'tfe.Estimator.export_saved_model',
        'export_dir_base, serving_input_receiver_fn, assets_extra=None, as_text=False, '
        'checkpoint_path=None, experimental_mode=tfe.ModeKeys.PREDICT'),
    'utils.variables_helper': _check_od_variables_helper,
}


ROWS = _rows()


def test_the_tables_were_read():
  assert len(ROWS) > 60
  assert any(old.startswith('`tf.contrib.framework.filter_variables') for _, old, _ in ROWS)


@pytest.mark.parametrize('section, old, new', ROWS, ids=[_row_key(new)[:60] for _, _, new in ROWS])
def test_row(section, old, new):
  _resolve_cell(section, new)
  key = _row_key(new)
  documented = _documented_call(old, new)
  if key not in ROW_CHECKS and documented:
    _check_documented_call(*documented)
    return
  assert key in ROW_CHECKS, (
      'docs/migrating.md row %r -> %r has no check: add ROW_CHECKS[%r] to %s (a small check '
      'of the call shape the row promises)' % (old, new, key, os.path.basename(__file__)))
  ROW_CHECKS[key]()


def test_every_check_has_its_row():
  keys = {_row_key(new) for _, _, new in ROWS}
  stale = sorted(set(ROW_CHECKS) - keys)
  assert not stale, 'ROW_CHECKS entries for rows no longer in docs/migrating.md: %s' % stale


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
