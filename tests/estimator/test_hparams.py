"""Tests for estimator.hparams.HParams (tf.contrib.training.HParams)."""

import json
import sys

import pytest

from estimator.hparams import HParams


def _hparams():
  return HParams(learning_rate=0.1, num_layers=3, activation='relu', use_bn=True,
                 sizes=[64, 32], rates=[0.5, 0.25])


def test_kwargs_attributes_and_values():
  hp = _hparams()
  assert hp.learning_rate == 0.1 and hp.num_layers == 3 and hp.activation == 'relu'
  assert hp.values() == {'learning_rate': 0.1, 'num_layers': 3, 'activation': 'relu',
                         'use_bn': True, 'sizes': [64, 32], 'rates': [0.5, 0.25]}
  assert 'num_layers' in hp and 'missing' not in hp
  assert str(hp).startswith("[('activation', 'relu')")
  assert repr(hp).startswith('HParams([')


def test_parse_sets_typed_values_and_chains():
  hp = _hparams().parse('learning_rate=0.3,num_layers=5, activation=tanh,use_bn=false,'
                        'sizes=[128,64,8],rates=[1 2]')
  assert hp.learning_rate == 0.3 and hp.num_layers == 5 and hp.activation == 'tanh'
  assert hp.use_bn is False
  assert hp.sizes == [128, 64, 8]
  assert hp.rates == [1.0, 2.0] and isinstance(hp.rates[0], float)
  assert _hparams().parse('learning_rate=2').learning_rate == 2.0
  assert _hparams().parse('use_bn=0').use_bn is False
  assert _hparams().parse('use_bn=True').use_bn is True
  assert _hparams().parse('sizes[1]=7').sizes == [64, 7]
  assert _hparams().parse('').values() == _hparams().values()


@pytest.mark.parametrize('text, message', [
    ('num_layers=1.5', "Could not parse hparam 'num_layers' of type 'int' with value '1.5' "
                       "in num_layers=1.5"),
    ('use_bn=maybe', "Could not parse hparam 'use_bn' of type 'bool' with value 'maybe'"),
    ('sizes=[1,x]', "Could not parse hparam 'sizes' of type 'int' with value '1,x'"),
    ('unknown=1', 'Unknown hyperparameter type for unknown'),
    ('num_layers=1,num_layers=2', "Multiple assignments to variable 'num_layers' in "
                                  "num_layers=1,num_layers=2"),
    ('=3', 'Malformed hyperparameter value: =3'),
    ('num_layers=[1,2]', 'Must not pass a list for single-valued parameter: num_layers'),
    ('sizes=4', 'Must pass a list for multi-valued parameter: sizes.'),
    ('sizes[0]=[1]', 'Assignment of a list to a list index.'),
    ('sizes[5]=1', 'Index 5 out of range for hparam sizes'),
])
def test_parse_errors(text, message):
  with pytest.raises(ValueError) as info:
    _hparams().parse(text)
  assert message in str(info.value)


@pytest.mark.parametrize('name, value', [
    ('num_layers', 2.5),        # a float never narrows to an int
    ('num_layers', True),       # bools and numbers never mix
    ('use_bn', 1),
    ('activation', 3),          # only strings become strings
    ('learning_rate', 'fast'),  # no string to number
])
def test_set_hparam_refuses_incompatible_values(name, value):
  with pytest.raises(ValueError, match="Could not cast hparam '%s'" % name):
    _hparams().set_hparam(name, value)


def test_set_hparam_and_override_from_dict():
  hp = _hparams()
  hp.set_hparam('learning_rate', 1)  # an int widens to a float
  assert hp.learning_rate == 1.0 and isinstance(hp.learning_rate, float)
  assert hp.override_from_dict({'num_layers': 7, 'sizes': [1]}) is hp
  assert hp.num_layers == 7 and hp.sizes == [1]
  with pytest.raises(KeyError):
    hp.override_from_dict({'nope': 1})


def test_add_del_hparam():
  hp = HParams()
  hp.add_hparam('batch_size', 32)
  assert hp.batch_size == 32
  with pytest.raises(ValueError, match='Hyperparameter name is reserved: batch_size'):
    hp.add_hparam('batch_size', 64)
  with pytest.raises(ValueError, match='Hyperparameter name is reserved: values'):
    hp.add_hparam('values', 1)
  with pytest.raises(ValueError, match='Multi-valued hyperparameters cannot be empty: x'):
    hp.add_hparam('x', [])
  hp.del_hparam('batch_size')
  hp.del_hparam('batch_size')  # deleting twice is fine
  assert 'batch_size' not in hp and not hasattr(hp, 'batch_size')
  hp.add_hparam('batch_size', 'now a string')
  assert hp.batch_size == 'now a string'


def test_json_round_trip_drops_callables():
  hp = _hparams()
  hp.add_hparam('fn', len)
  text = hp.to_json(sort_keys=True)
  assert 'fn' not in json.loads(text)
  other = HParams(learning_rate=0.0, num_layers=0, activation='', use_bn=False,
                  sizes=[0], rates=[0.0])
  assert other.parse_json(text).values() == json.loads(text)
  with pytest.raises(ValueError, match="Could not cast hparam 'num_layers'"):
    other.parse_json('{"num_layers": 2.5}')


def test_get_checks_default_type():
  hp = _hparams()
  assert hp.get('num_layers') == 3
  assert hp.get('num_layers', 10) == 3
  assert hp.get('missing', 'dflt') == 'dflt'
  assert hp.get('sizes', [1]) == [64, 32]
  with pytest.raises(ValueError, match="Hparam 'num_layers' of type .* is incompatible "
                                       'with default=x'):
    hp.get('num_layers', 'x')
  with pytest.raises(ValueError, match="Hparam 'sizes' of type 'list<"):
    hp.get('sizes', 1)


def test_none_valued_hparam_accepts_anything_and_model_structure():
  hp = HParams(model_structure={'layers': 2}, extra=None)
  hp.set_hparam('extra', 5)
  assert hp.extra == 5
  assert hp.get_model_structure() == {'layers': 2}
  with pytest.raises(ValueError, match='hparam_def'):
    HParams(hparam_def=object())


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
