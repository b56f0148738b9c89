"""The docs/migrating.md rows of the OD names added for issue 26 (items 11 and 12):
each promised call, with its parameters and defaults, binds to the name it maps to."""

import ast
import importlib
import inspect
import os
import re
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIGRATING = os.path.join(REPO_ROOT, 'docs', 'migrating.md')

# The slimtrain names whose rows this test checks.
NAMES = (
    'trainer.model_lib.create_estimator_and_inputs',
    'trainer.model_lib.create_model_fn',
    'trainer.model_lib.unstack_batch',
    'core.config_util.merge_external_params_with_configs',
    'utils.ops.padded_one_hot_encoding',
    'utils.ops.merge_boxes_with_multiple_labels',
    'builders.optimizer_builder.build',
)
_CALL = re.compile(r'`([A-Za-z_][\w.]*)\(([^`]*)\)`')


def _documented_calls():
  """(name, parameter text) for each call in the slimtrain column of a table row."""
  with open(MIGRATING) as f:
    lines = f.read().splitlines()
  calls = []
  for line in lines:
    if not line.startswith('| ') or line.startswith('| ---'):
      continue
    cells = [cell.strip() for cell in line.strip().strip('|').split(' | ')]
    if len(cells) == 2:
      calls.extend(m.groups() for m in _CALL.finditer(cells[1]) if m.group(1) in NAMES)
  return calls


def _resolve(name):
  module, _, attribute = name.rpartition('.')
  return getattr(importlib.import_module(module), attribute)


def _default_value(node, function):
  """A documented default: a literal, or a name of the function's module."""
  try:
    return ast.literal_eval(node)
  except ValueError:
    return getattr(sys.modules[function.__module__], ast.unparse(node))


def test_every_od_row_was_found():
  assert {name for name, _ in _documented_calls()} == set(NAMES)


@pytest.mark.parametrize('name, parameters', _documented_calls())
def test_documented_call_binds_with_its_defaults(name, parameters):
  function = _resolve(name)
  signature = inspect.signature(function)
  documented = ast.parse('def f(%s): pass' % parameters).body[0].args
  required = [a.arg for a in documented.args[:len(documented.args) - len(documented.defaults)]]
  # The call as the row writes it: required arguments by position...
  signature.bind(*required)
  # ... and every documented parameter by keyword.
  keywords = {a.arg: None for a in documented.args}
  if documented.kwarg:
    keywords['some_override'] = 1
    assert any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()), name
  signature.bind(**keywords)
  with_defaults = documented.args[len(required):]
  for argument, default in zip(with_defaults, documented.defaults):
    actual = signature.parameters[argument.arg].default
    assert actual == _default_value(default, function), (name, argument.arg)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
