"""tools/originality_check.py on a tiny made-up pair of trees (no network).

The "original" holds a function with a comment and a docstring; our copy
keeps one function verbatim (re-indented and re-wrapped), renames the
variables of another, and writes a third from scratch. The check must point
at the first, find the second only with `--normalize-names`, and stay quiet
about the third.
"""

import json
import os
import sys

import pytest

from tools import originality_check

_ORIGINAL = '''
def moving_total(values, decay):
  """Walks the values and keeps an exponentially decayed running total of them.

  The total starts at zero and each step multiplies it by the decay first.
  """
  total = 0.0
  for value in values:
    # Older values fade out geometrically.
    total = total * decay + value
  return total


def clipped_mean(numbers, low, high):
  kept = [n for n in numbers if low <= n <= high]
  if not kept:
    raise ValueError('nothing left between low and high')
  return sum(kept) / len(kept)
'''

_OURS = '''
import math


def moving_total(values, decay):
    """Walks the values and keeps an exponentially decayed
    running total of them.

    The total starts at zero and each step multiplies it by
    the decay first.
    """
    total = 0.0
    for value in values:
        # Older values fade out
        # geometrically.
        total = total * decay + value
    return total


def fresh_helper(a, b):
  return math.hypot(a, b) if a > b else math.atan2(b, a)


def trimmed_average(xs, lo, hi):
  inside = [x for x in xs if lo <= x <= hi]
  if not inside:
    raise ValueError('nothing left between low and high')
  return sum(inside) / len(inside)
'''


def _line(text, needle):
  """1-based number of the line of `text` that holds `needle`."""
  return text[:text.index(needle)].count('\n') + 1


# Where each piece sits, counted rather than written down.
_COPY = (_line(_OURS, 'def moving_total'), _line(_OURS, '    return total'))
_FRESH = (_line(_OURS, 'def fresh_helper'), _line(_OURS, 'math.hypot'))
_TWIN = (_line(_OURS, 'def trimmed_average'), _line(_OURS, 'sum(inside)'))
_THEIRS = (_line(_ORIGINAL, 'def moving_total'), _line(_ORIGINAL, '  return total'))


@pytest.fixture
def trees(tmp_path):
  original = tmp_path / 'theirs' / 'pkg' / 'maths.py'
  original.parent.mkdir(parents=True)
  original.write_text(_ORIGINAL)
  ours = tmp_path / 'ours' / 'maths.py'
  ours.parent.mkdir()
  ours.write_text(_OURS)
  return str(ours), str(tmp_path / 'theirs')


def _runs(trees, **kwargs):
  ours, theirs = trees
  return originality_check.find_runs(
      [ours], originality_check.python_files([theirs]), **kwargs)


def test_a_verbatim_function_is_one_run_whatever_its_layout(trees):
  (run,) = _runs(trees)
  assert run.path == trees[0]
  # A run may reach one token past the copy: the `def` that follows it.
  assert run.first_line == _COPY[0] and _COPY[1] <= run.last_line <= _FRESH[0]
  assert run.original.endswith('maths.py')
  assert run.original_lines[0] == _THEIRS[0] and run.original_lines[1] >= _THEIRS[1]
  assert run.num_tokens >= 40


def test_renamed_variables_are_found_only_with_normalized_names(trees):
  runs = _runs(trees, min_tokens=30, normalize_names=True)
  spans = [(r.first_line, r.last_line) for r in runs]
  assert spans[-1] == _TWIN, spans
  assert all(last < _FRESH[1] or first > _FRESH[1] for first, last in spans), spans
  assert not [r for r in _runs(trees, min_tokens=30) if r.first_line >= _TWIN[0]]


def test_a_run_comes_from_one_original_and_overlaps_keep_the_longest(tmp_path):
  first = 'def first_half(a, b):\n  return [x * a + b for x in range(a) if x % b]\n'
  second = 'def second_half(c, d):\n  return {k: (c - k) ** d for k in range(c) if k > d}\n'
  ours = tmp_path / 'ours.py'
  ours.write_text(first + second)
  (tmp_path / 'one.py').write_text(first)
  (tmp_path / 'two.py').write_text(second)
  (tmp_path / 'both.py').write_text(first + second)
  theirs = [str(tmp_path / name) for name in ('one.py', 'two.py')]
  # Two originals, one half each: two runs, each naming its own file.
  runs = originality_check.find_runs([str(ours)], theirs, min_tokens=20)
  assert [(r.first_line, os.path.basename(r.original)) for r in runs] == [
      (1, 'one.py'), (3, 'two.py')]
  # A file holding both halves explains the whole stretch: one run.
  runs = originality_check.find_runs([str(ours)], theirs + [str(tmp_path / 'both.py')],
                                     min_tokens=20)
  assert [(r.first_line, r.last_line, os.path.basename(r.original)) for r in runs] == [
      (1, 4, 'both.py')]


def test_short_shared_idioms_stay_below_the_thresholds(trees):
  assert not _runs(trees, min_tokens=200, min_lines=40)


def test_a_tree_of_our_own_words_reports_nothing(tmp_path, trees):
  unrelated = tmp_path / 'new.py'
  unrelated.write_text(_OURS.split('def trimmed_average')[0].split('return total')[1])
  assert not originality_check.find_runs([str(unrelated)], [trees[0]])


def test_command_line_writes_the_report_and_exits_1_on_findings(trees, tmp_path, capsys):
  ours, theirs = trees
  report = tmp_path / 'report.json'
  assert originality_check.main(['--ours', ours, '--originals', theirs,
                                 '--json', str(report)]) == 1
  printed = capsys.readouterr().out
  assert '%s:%d-' % (ours, _COPY[0]) in printed
  assert '1 run(s) in 1 file(s)' in printed
  (entry,) = json.loads(report.read_text())
  assert entry['first_line'] == _COPY[0] and entry['original_lines'][0] == _THEIRS[0]


def test_sources_python_cannot_tokenize_are_still_read():
  # An unclosed string makes Python's tokenizer give up; words still count.
  tokens = originality_check.tokens_of('print "hello %s" % name\nx = """open\n')
  assert [t for t, _ in tokens][:3] == ['print', '"', 'hello']
  assert tokens[-1] == ('open', 2)


def test_bad_arguments_name_the_flag(tmp_path):
  with pytest.raises(ValueError, match='--ours/--originals'):
    originality_check.python_files([str(tmp_path / 'missing')])
  with pytest.raises(ValueError, match='--window'):
    originality_check.find_runs([], [], window=0)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
