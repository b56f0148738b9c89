"""Runs tf-slim's own shipped tests (`tf_slim/**/*_test.py`) under slimtrain's compat layer.

tf-slim 1.1.0 ships its unit tests inside the wheel. Running them on the
TF / tf-keras / numpy we install, with `core.compat` applied first, is the
strongest check that the compat layer makes tf-slim itself work; a TF or
tf-slim upgrade that breaks something shows up as a new failure.

Each test module runs in its own `python -m pytest` process (TF and tf-slim
keep global state: default graph, resource-variable switch, registered
gradients), forked by tests/fork_server.py when it can (TF imported once),
with `tests.compat.shipped_plugin` loaded first. Failures that
are problems of the test file alone (numpy 2 scalar conversion, TF-internal
names the *test* uses, TF1 device strings) are listed in core/COMPAT.md under
"Expected failures"; that list, exactly, is run as strict expected failures,
so a new failure and a listed failure that starts passing both fail.

`TEST_FILE_REWRITES` is the evidence that each listed failure is the test
file's own: `run_rewritten_module` runs a temp copy of the test file with
those small text edits (and nothing else changed), where every listed
test of the module must pass.

    from tests.compat import shipped_tests
    result = shipped_tests.run_module('learning_test', expected_failures=...)
    result.problems()   # [] when everything is as expected
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from tests import fork_server

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
COMPAT_MD = os.path.join(REPO_ROOT, 'core', 'COMPAT.md')
PLUGIN = 'tests.compat.shipped_plugin'

# Always run (about 5 minutes of one core, TF import included): every module
# slimtrain's code calls into: slim.learning, create_train_op, evaluation, the
# example decoder, prefetch queue and parallel reader, layers and their
# helpers, optimizers, arg_scope, variables and the nets it builds.
FAST_MODULES = (
    'learning_test',
    'training/training_test',
    'data/tfexample_decoder_test',
    'layers/utils_test',
    'layers/optimizers_test',
    'ops/arg_scope_test',
    'ops/variables_test',
    'nets/vgg_test',
    # The rest of the modules slimtrain relies on (issue 2's required list).
    'training/evaluation_test',
    'evaluation_test',
    'data/prefetch_queue_test',
    'data/parallel_reader_test',
    'layers/layers_test',
    'nets/resnet_v1_test',
    'nets/resnet_v2_test',
    'nets/inception_v3_test',
)

# The network modules build whole ResNets and Inception v3 many times over
# (most of the required list's time): test_tf_slim_shipped_nets.py runs them,
# so that `make test`'s workers and bazel run them beside the other modules.
NET_MODULES = tuple(m for m in FAST_MODULES if m.startswith('nets/'))

# Run with --compat-slow / SLIMTRAIN_COMPAT_SLOW=1 (about 3 more minutes;
# metric_ops takes two).
SLOW_MODULES = (
    # Beyond the modules slimtrain's code calls: the metrics, losses and
    # remaining layers that ported user code may call.
    'metrics/metric_ops_test',
    'metrics/classification_test',
    'metrics/histogram_ops_test',
    'losses/loss_ops_test',
    'layers/normalization_test',
    'layers/regularizers_test',
    'layers/initializers_test',
    'summaries_test',
    'data/dataset_data_provider_test',
)

_IMPORT_TOGGLE = 'from tensorflow.python.ops import resource_variables_toggle\n'
_IMPORT_VARIABLE_V1 = 'from tensorflow.python.ops import variable_v1\n'
_NUMPY2_LABEL = ('j = int(2 * self._labels[i] + np.random.randint(0, 2))',
                 'j = int(2 * self._labels[i, 0] + np.random.randint(0, 2))')

# module -> (extra imports, [(old, new) or (old, new, test_method), ...]): the
# minimal edits of the test file that make its listed expected failures pass.
# With a test_method the edit applies inside that method only. Every `old`
# must occur (else the rewrite is stale and the check fails).
TEST_FILE_REWRITES = {
    'learning_test': ('', [_NUMPY2_LABEL]),
    'training/training_test': ('', [_NUMPY2_LABEL]),
    'training/evaluation_test': ('', [_NUMPY2_LABEL]),
    'evaluation_test': ('', [
        ('hooks.DumpingDebugHook(dumping_root, log_usage=False)',
         'hooks.DumpingDebugHook(dumping_root)'),
    ]),
    'data/tfexample_decoder_test': ('', [('image.tostring()', 'image.tobytes()')]),
    # TF 2.21's nn.dropout ends in a SelectV2 op where TF 2.1 had a Mul.
    'layers/layers_test': ('', [
        ("self.assertEqual(output.op.name.lower(), 'dropout/dropout_1/mul_1')",
         "self.assertEqual(output.op.name.lower(), 'dropout/dropout_1/selectv2')"),
    ]),
    'layers/optimizers_test': (_IMPORT_TOGGLE, [
        ('variable_scope.disable_resource_variables()',
         'resource_variables_toggle.disable_resource_variables()'),
        ('variable_scope.enable_resource_variables()',
         'resource_variables_toggle.enable_resource_variables()'),
    ]),
    'metrics/metric_ops_test': (_IMPORT_TOGGLE + _IMPORT_VARIABLE_V1, [
        ('variable_scope.enable_resource_variables()',
         'resource_variables_toggle.enable_resource_variables()'),
        ('variables.VariableV1(', 'variable_v1.VariableV1('),
        # tf.compat.v1.Variable (VariableV1) is no longer a base class of
        # resource variables, which assign_add returns in TF 2.21.
        ('(ops.Operation, ops.Tensor, tf.Variable)',
         '(ops.Operation, ops.Tensor, variables.Variable)', 'testReturnType'),
    ]),
    # numpy 2 (NEP 50) keeps python-float minus float32 in float32, so the
    # 7-place comparison sees float32 rounding; numpy 1 computed in float64.
    'metrics/classification_test': ('', [
        ('f1.eval())', 'float(f1.eval()))', 'testSomeCorrect'),
    ]),
    'ops/variables_test': (_IMPORT_TOGGLE + _IMPORT_VARIABLE_V1, [
        ('variable_scope.resource_variables_enabled()',
         'resource_variables_toggle.resource_variables_enabled()'),
        ('variable_scope.disable_resource_variables()',
         'resource_variables_toggle.disable_resource_variables()'),
        ('variable_scope.enable_resource_variables()',
         'resource_variables_toggle.enable_resource_variables()'),
        ('variables_lib.VariableV1(', 'variable_v1.VariableV1('),
        # testVariableWithReplicaDeviceSetter: TF 2.21's replica_device_setter
        # no longer appends /device:CPU:0 to the ps device.
        ("/cpu:0')", "')", 'testVariableWithReplicaDeviceSetter'),
    ]),
}

# Lines of the expected-failure list in core/COMPAT.md:
#   - `ops/variables_test.py::VariablesTest::testX` — reason
_EXPECTED_LINE = re.compile(r'^\s*[-*]\s+`([^`]+\.py::[^`]+)`\s*(?:—|--|-|:)\s*(.+?)\s*$')
_EXPECTED_HEADING = '## Expected failures'


def tf_slim_dir():
  """Returns the directory of the installed tf_slim package.

  Returns:
    An absolute path, e.g. `.venv/lib/python3.11/site-packages/tf_slim`.
  """
  import tf_slim  # Imported here: callers may only want the constants.
  return os.path.dirname(os.path.abspath(tf_slim.__file__))


def module_of(test_id):
  """Returns the module of a test id: `ops/variables_test.py::T::t` -> `ops/variables_test`."""
  return test_id.split('::', 1)[0][:-len('.py')]


def load_expected_failures(path=COMPAT_MD):
  """Parses the expected-failure list of core/COMPAT.md.

  The list is every line of the form ``- `<file>.py::<Class>::<test>` — reason``
  in the section whose heading starts with `## Expected failures`.

  Args:
    path: the markdown file.

  Returns:
    An ordered dict test id -> reason.

  Raises:
    ValueError: when the section is missing, a test id is listed twice or has
      no reason.
  """
  expected = collections.OrderedDict()
  in_section = False
  with open(path) as f:
    lines = f.read().splitlines()
  for number, line in enumerate(lines, 1):
    if line.startswith('## '):
      in_section = line.startswith(_EXPECTED_HEADING)
      continue
    if not in_section:
      continue
    match = _EXPECTED_LINE.match(line)
    if not match:
      continue
    test_id, reason = match.groups()
    if test_id in expected:
      raise ValueError('%s:%d: %s is listed twice' % (path, number, test_id))
    if not reason:
      raise ValueError('%s:%d: %s has no reason' % (path, number, test_id))
    expected[test_id] = reason
  if not expected and not any(l.startswith(_EXPECTED_HEADING) for l in lines):
    raise ValueError('%s: no section starting with %r' % (path, _EXPECTED_HEADING))
  return expected


class ModuleResult(collections.namedtuple(
    'ModuleResult', ['module', 'returncode', 'outcomes', 'expected', 'seconds', 'output'])):
  """What one shipped test module did.

  Fields: `module` (e.g. 'learning_test'), `returncode` of pytest, `outcomes`
  (test id -> 'passed' | 'failed' | 'skipped' | 'xfailed' | 'xpassed'),
  `expected` (the ids run as expected failures), `seconds` (wall time of the
  process) and `output` (the tail of its output).
  """

  def count(self, *outcomes):
    """Returns how many tests ended with one of `outcomes`."""
    return sum(1 for o in self.outcomes.values() if o in outcomes)

  def problems(self):
    """Lists everything that differs from the expectation.

    Returns:
      A list of one-line strings, empty when the module is as expected.
    """
    problems = []
    for test_id, outcome in sorted(self.outcomes.items()):
      if outcome == 'failed':
        problems.append('%s failed (not an expected failure)' % test_id)
      elif outcome == 'xpassed':
        problems.append('%s passed but is listed as an expected failure in core/COMPAT.md'
                        % test_id)
    for test_id in sorted(self.expected):
      if test_id not in self.outcomes:
        problems.append('%s is listed in core/COMPAT.md but was not run' % test_id)
    if not self.outcomes:
      problems.append('no test ran (pytest exit code %d)' % self.returncode)
    elif self.returncode not in (0, 1) or (self.returncode == 1 and not problems):
      problems.append('pytest exit code %d' % self.returncode)
    return problems

  def summary(self):
    """One line: counts of each outcome and the wall time."""
    return '%s: %d passed, %d expected failures, %d failed, %d skipped in %.0f s' % (
        self.module, self.count('passed'), self.count('xfailed'),
        self.count('failed', 'xpassed'), self.count('skipped'), self.seconds)


def _child_env(report_path, xfail_path, extra_env=None):
  """The environment of a shipped-test process.

  Args:
    report_path: where the plugin writes the outcomes.
    xfail_path: file of expected-failure ids.
    extra_env: optional dict of more variables (e.g. SLIMTRAIN_DISABLE_COMPAT).

  Returns:
    A dict for subprocess.
  """
  env = {k: v for k, v in os.environ.items() if not k.startswith('PYTEST_')}
  env.update({
      'PYTHONPATH': REPO_ROOT + os.pathsep + env.get('PYTHONPATH', ''),
      # Never write __pycache__ into site-packages.
      'PYTHONDONTWRITEBYTECODE': '1',
      'TF_CPP_MIN_LOG_LEVEL': '2',
      'SLIMTRAIN_SHIPPED_REPORT': report_path,
      'SLIMTRAIN_SHIPPED_XFAIL': xfail_path,
      'CUDA_VISIBLE_DEVICES': env.get('CUDA_VISIBLE_DEVICES', ''),
  })
  env.update(extra_env or {})
  return env


def _run_pytest(module, test_file, rootdir, expected, timeout, extra_env=None, only=None):
  """Runs one test file in a fresh `python -m pytest` process.

  Args:
    module: the module name, e.g. 'learning_test'.
    test_file: the path of the file to run.
    rootdir: the directory test ids are relative to (a `tf_slim` directory).
    expected: test ids to run as strict expected failures.
    timeout: seconds before the process is killed.
    extra_env: optional dict of more environment variables.
    only: optional test ids (`<module>.py::Class::test`) to run instead of
      the whole file.

  Returns:
    A `ModuleResult`.
  """
  workdir = tempfile.mkdtemp(prefix='shipped_')
  try:
    report_path = os.path.join(workdir, 'report.json')
    xfail_path = os.path.join(workdir, 'xfail.txt')
    with open(xfail_path, 'w') as f:
      f.write(''.join(test_id + '\n' for test_id in sorted(expected)))
    ini_path = os.path.join(workdir, 'pytest.ini')
    with open(ini_path, 'w') as f:
      f.write('[pytest]\nfilterwarnings = ignore::DeprecationWarning\n')
    command = [sys.executable, '-m', 'pytest', '-p', PLUGIN, '-p', 'no:cacheprovider',
               '-c', ini_path, '--rootdir', rootdir, '-q', '-rfE', '--no-header',
               '--tb=short']
    if only:
      command += [os.path.join(rootdir, t) for t in sorted(only)]
    else:
      command.append(test_file)
    start = time.time()
    try:
      # Forked from a process that has imported TF once (tests/fork_server.py):
      # ~6 s of CPU saved per module, and the child still starts as `python -m
      # pytest` would, with core.compat applied (or not: a different
      # SLIMTRAIN_DISABLE_COMPAT gets a server imported under it).
      process = fork_server.run(command, cwd=workdir, capture_output=True, text=True,
                                env=_child_env(report_path, xfail_path, extra_env),
                                timeout=timeout)
      returncode, output = process.returncode, process.stdout + process.stderr
    except subprocess.TimeoutExpired as e:
      returncode = -9
      partial = e.stdout or ''
      if isinstance(partial, bytes):
        partial = partial.decode('utf-8', 'replace')
      output = '%s\n(killed after %d s)' % (partial[-4000:], timeout)
    seconds = time.time() - start
    outcomes = {}
    if os.path.exists(report_path):
      with open(report_path) as f:
        outcomes = json.load(f)
    return ModuleResult(module, returncode, outcomes, frozenset(expected), seconds,
                        output[-6000:])
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


def run_module(module, expected_failures, timeout=900, extra_env=None):
  """Runs one shipped tf-slim test module as installed.

  Args:
    module: path of the module under tf_slim without '.py', e.g. 'ops/variables_test'.
    expected_failures: all expected-failure ids (any module; those of this
      module are used).
    timeout: seconds before the process is killed.
    extra_env: optional dict of more environment variables.

  Returns:
    A `ModuleResult`.
  """
  root = tf_slim_dir()
  expected = {t for t in expected_failures if module_of(t) == module}
  return _run_pytest(module, os.path.join(root, module + '.py'), root, expected, timeout,
                     extra_env)


def rewrite_test_source(module, source):
  """Applies `TEST_FILE_REWRITES[module]` to a test file's source.

  Args:
    module: e.g. 'learning_test'.
    source: the file's text.

  Returns:
    The edited text.

  Raises:
    ValueError: when a rewrite's `old` text is not in the file.
  """
  imports, rewrites = TEST_FILE_REWRITES[module]
  for rewrite in rewrites:
    old, new = rewrite[:2]
    begin, end = 0, len(source)
    if len(rewrite) > 2:
      begin = source.find('  def %s(' % rewrite[2])
      if begin < 0:
        raise ValueError('%s: test method %s not found' % (module, rewrite[2]))
      end = source.find('\n  def ', begin + 1)
      end = len(source) if end < 0 else end
    if old not in source[begin:end]:
      raise ValueError('%s: rewrite target not found: %r' % (module, old))
    source = source[:begin] + source[begin:end].replace(old, new) + source[end:]
  if imports:
    # After the last `from __future__` line, which must stay first.
    lines = source.splitlines(True)
    index = max([i + 1 for i, l in enumerate(lines) if l.startswith('from __future__')] or [0])
    source = ''.join(lines[:index] + [imports] + lines[index:])
  return source


def run_rewritten_module(module, timeout=900, only=None):
  """Runs a temp copy of a shipped test module with `TEST_FILE_REWRITES` applied.

  Nothing but the test file changes (same tf_slim, same compat layer), so a
  listed failure that passes here is a problem of the test file alone.

  Args:
    module: e.g. 'learning_test'; must have an entry in TEST_FILE_REWRITES.
    timeout: seconds before the process is killed.
    only: optional test ids of this module (`learning_test.py::TrainTest::t`)
      to run instead of the whole file: the expected failures, which is all
      the proof needs and a fraction of the module's time.

  Returns:
    A `ModuleResult` run with no expected failures.
  """
  copy_root = os.path.join(tempfile.mkdtemp(prefix='shipped_rewritten_'), 'tf_slim')
  try:
    target = os.path.join(copy_root, module + '.py')
    os.makedirs(os.path.dirname(target))
    with open(os.path.join(tf_slim_dir(), module + '.py')) as f:
      source = f.read()
    with open(target, 'w') as f:
      f.write(rewrite_test_source(module, source))
    return _run_pytest(module, target, copy_root, set(), timeout, only=only)
  finally:
    shutil.rmtree(os.path.dirname(copy_root), ignore_errors=True)


def check_module(module):
  """Runs one shipped module and fails with every difference from the expectation.

  Args:
    module: e.g. 'learning_test'.
  """
  result = run_module(module, load_expected_failures())
  print('\n' + result.summary())
  problems = result.problems()
  assert not problems, '%s\n  %s\n--- output tail ---\n%s' % (
      result.summary(), '\n  '.join(problems), result.output[-4000:])
