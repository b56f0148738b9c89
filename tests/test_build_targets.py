"""Every test file under tests/ is runnable by both pytest and bazel.

Fails when a `test_*.py` has no `slimtrain_py_test` target in its folder's
BUILD, when a target names a file that does not exist, or when a test file
lacks the `__main__` block that bazel runs, when a file that loads
TensorFlow is declared `small` (bazel gives small targets 60 s, less than a
TensorFlow import plus a graph takes on a busy 2-core CI machine), or when a
target lists a dependency the macro already adds (bazel refuses the whole
package: a duplicated label in `deps`), when a test file imports another
(bazel cannot give one test's file to another target), when a test takes
a fixture of tests/conftest.py without that file in its data, or when a test
that builds network namespaces is sandboxed (bazel's sandbox makes it skip).
"""

import ast
import json
import os
import re
import sys

import pytest

# Under bazel this file is a runfiles symlink; its real path is in the source
# tree, where every test folder (each its own bazel package) can be listed.
_TESTS_DIR = os.path.dirname(os.path.realpath(__file__))
# Helper modules whose names start with test_ but hold no tests.
_LIBRARIES = {'test_util'}
_TARGET = re.compile(r'slimtrain_py_test\(\s*name\s*=\s*"([^"]+)"', re.S)
_TARGET_SIZE = re.compile(
    r'slimtrain_py_test\(\s*name\s*=\s*"([^"]+)"[^)]*?size\s*=\s*"([a-z]+)"', re.S)
# Every package of the project imports TensorFlow (core/compat.py first).
_LOADS_TENSORFLOW = re.compile(
    r'^\s*(import (tensorflow|estimator)|from (tensorflow|deployment|core|builders|models|'
    r'trainer|estimator|tools|benchmarks|protos|tests)[. ])', re.M)


def _test_folders():
  for root, dirs, files in os.walk(_TESTS_DIR):
    dirs[:] = [d for d in dirs if not d.startswith(('.', '__'))]
    tests = sorted(f[:-3] for f in files if f.startswith('test_') and f.endswith('.py')
                   and f[:-3] not in _LIBRARIES)
    if tests:
      yield root, tests


def _target_blocks(folder):
  """{target name: the text of its slimtrain_py_test(...) call} of the folder's BUILD."""
  with open(os.path.join(folder, 'BUILD'), encoding='utf-8') as f:
    build = f.read()
  return {_TARGET.search('slimtrain_py_test(' + block).group(1): block
          for block in re.findall(r'slimtrain_py_test\((.*?)\n\)', build, re.S)}


def _first_match(folder, name, pattern):
  """`pattern` searched in the test file `name` of `folder`."""
  with open(os.path.join(folder, name + '.py'), encoding='utf-8') as f:
    return pattern.search(f.read())


def _declared_targets(folder):
  build = os.path.join(folder, 'BUILD')
  if not os.path.exists(build):
    return None
  with open(build, encoding='utf-8') as f:
    return set(_TARGET.findall(f.read()))


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_every_test_file_has_a_py_test_target(folder, tests):
  declared = _declared_targets(folder)
  relative = os.path.relpath(folder, os.path.dirname(_TESTS_DIR))
  assert declared is not None, '%s has test files but no BUILD' % relative
  missing = sorted(set(tests) - declared)
  assert not missing, '%s/BUILD lacks slimtrain_py_test for: %s' % (relative, missing)
  dangling = sorted(declared - set(tests))
  assert not dangling, '%s/BUILD declares targets without files: %s' % (relative, dangling)
  assert os.path.exists(os.path.join(folder, '__init__.py')), (
      '%s needs an __init__.py' % relative)


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_every_test_file_runs_as_main(folder, tests):
  for name in tests:
    path = os.path.join(folder, name + '.py')
    with open(path, encoding='utf-8') as f:
      tree = ast.parse(f.read(), path)
    has_main = any(
        isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and
        isinstance(node.test.left, ast.Name) and node.test.left.id == '__name__'
        for node in tree.body)
    assert has_main, "%s has no `if __name__ == '__main__':` block" % path


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_no_test_file_imports_another_test_file(folder, tests):
  # A py_test's file is not a library bazel can hand another target: such an
  # import passes under pytest and fails under bazel (ModuleNotFoundError).
  for name in tests:
    with open(os.path.join(folder, name + '.py'), encoding='utf-8') as f:
      found = re.search(r'^\s*(from tests(\.\w+)*\.test_\w+ import|import tests(\.\w+)*\.test_)',
                        f.read(), re.M)
    assert not found, '%s imports a test file (%r): move what it shares into a library' % (
        os.path.join(os.path.relpath(folder, os.path.dirname(_TESTS_DIR)), name + '.py'),
        found.group(0).strip())


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_no_target_repeats_a_dependency_the_macro_adds(folder, tests):
  del tests
  with open(os.path.join(_TESTS_DIR, 'defs.bzl'), encoding='utf-8') as f:
    added = set(re.findall(r'"(//[^"]+)"', re.search(r'deps = \[([^\]]*)\] \+ deps',
                                                     f.read()).group(1)))
  assert added, 'tests/defs.bzl: the deps the macro adds were not found'
  for name, block in _target_blocks(folder).items():
    deps = re.search(r'deps\s*=\s*\[([^\]]*)\]', block)
    repeated = sorted(added & set(re.findall(r'"([^"]+)"', deps.group(1)))) if deps else []
    assert not repeated, '%s/BUILD: %s lists %s, which slimtrain_py_test already adds' % (
        os.path.relpath(folder, os.path.dirname(_TESTS_DIR)), name, repeated)


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_no_file_that_loads_tensorflow_is_a_small_target(folder, tests):
  with open(os.path.join(folder, 'BUILD'), encoding='utf-8') as f:
    sizes = dict(_TARGET_SIZE.findall(f.read()))
  for name in tests:
    loads_tensorflow = _first_match(folder, name, _LOADS_TENSORFLOW)
    assert not (sizes.get(name) == 'small' and loads_tensorflow), (
        '%s/BUILD: %s loads TensorFlow (%r); declare it size = "medium" or larger' % (
            os.path.relpath(folder, os.path.dirname(_TESTS_DIR)), name,
            loads_tensorflow.group(0).strip()))


# bazel's test timeout of each size, in seconds.
_SIZE_TIMEOUT_SECS = {'small': 60, 'medium': 300, 'large': 900, 'enormous': 3600}
# A target's timeout must be this many times the seconds its file took in the
# measured whole-suite run (tests/file_seconds.json): bazel runs two targets at
# once, and a loaded CI machine is twice as slow again. (Under load average 20
# test_launch and test_estimator_faults hit large's 900 s.)
_TIMEOUT_MARGIN = 3


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_every_target_has_a_timeout_well_above_its_measured_time(folder, tests):
  with open(os.path.join(_TESTS_DIR, 'file_seconds.json'), encoding='utf-8') as f:
    measured = json.load(f)
  with open(os.path.join(folder, 'BUILD'), encoding='utf-8') as f:
    sizes = dict(_TARGET_SIZE.findall(f.read()))
  package = os.path.relpath(folder, os.path.dirname(_TESTS_DIR))
  for name in tests:
    seconds = measured.get('%s/%s.py' % (package, name))
    size = sizes.get(name, 'medium')  # slimtrain_py_test's default
    assert seconds is None or seconds * _TIMEOUT_MARGIN <= _SIZE_TIMEOUT_SECS[size], (
        '%s/BUILD: %s took %.0f s in the measured run; size "%s" times out at %d s, less '
        'than %d times that: declare a larger size' % (
            package, name, seconds, size, _SIZE_TIMEOUT_SECS[size], _TIMEOUT_MARGIN))


# Fixtures that tests/conftest.py provides: bazel hands conftest.py only to the
# targets that list it as data.
_CONFTEST_FIXTURES = re.compile(r'\bnetns_network\b')
# This file names those patterns itself.
_SELF = os.path.splitext(os.path.basename(__file__))[0]


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_a_test_taking_a_conftest_fixture_has_conftest_in_its_data(folder, tests):
  blocks = _target_blocks(folder)
  for name in set(tests) - {_SELF}:
    uses_fixture = _first_match(folder, name, _CONFTEST_FIXTURES)
    has_conftest = re.search(r'data\s*=\s*\[[^\]]*"//tests:conftest\.py"', blocks.get(name, ''))
    assert not (uses_fixture and not has_conftest), (
        '%s/BUILD: %s takes the %s fixture of tests/conftest.py; add "//tests:conftest.py" '
        'to its data' % (os.path.relpath(folder, os.path.dirname(_TESTS_DIR)), name,
                         uses_fixture.group(0)))


# A test that builds network namespaces (the netns_network fixture, or
# deployment.netns itself).
_USES_NETNS = re.compile(r'\bnetns_network\b|from deployment import netns\b|--netns\b')


@pytest.mark.parametrize('folder, tests', list(_test_folders()),
                         ids=lambda v: os.path.relpath(v, _TESTS_DIR) if isinstance(v, str) else '')
def test_a_test_building_network_namespaces_is_not_sandboxed(folder, tests):
  # bazel's linux-sandbox mounts /run/netns read-only, and netns_fixture then
  # skips every such test: `bazel test //...` passed without running them.
  blocks = _target_blocks(folder)
  for name in set(tests) - {_SELF}:
    uses_netns = _first_match(folder, name, _USES_NETNS)
    tags = re.search(r'tags\s*=\s*\[([^\]]*)\]', blocks.get(name, ''))
    sandboxed = not (tags and '"no-sandbox"' in tags.group(1))
    assert not (uses_netns and sandboxed), (
        '%s/BUILD: %s builds network namespaces (%r); add "no-sandbox" to its tags' % (
            os.path.relpath(folder, os.path.dirname(_TESTS_DIR)), name, uses_netns.group(0)))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
