r"""Finds long stretches of our Python that also appear in another code base.

slimtrain keeps the names, signatures, defaults and error texts of the
projects it replaces (tf_slim, the Object Detection API, tf.estimator), but
its code, docstrings and comments are meant to be its own. This tool checks
that mechanically: it cuts every file into overlapping windows of
`--window` tokens ("shingles"), looks each of our windows up among the
reference files' windows, and reports the stretches of our files where the
shared windows join into a run of at least `--min-tokens` tokens or
`--min-lines` lines.

What counts as a token:
* code: Python tokens as written (names, operators, numbers);
* comments and strings (docstrings included): their words, lower-cased, so
  that re-wrapping a sentence does not hide it;
* layout (indentation, blank lines, line breaks) is dropped.
With `--normalize-names` every identifier becomes the same token, which
also finds code whose variables were renamed but whose structure was kept
(noisier: short idioms match more often).

Usage, with the reference trees already on disk (the tool needs no network):

  python -m tools.originality_check --ours builders core deployment \
      --originals /tmp/originals/od_api /tmp/originals/tf-slim

  python -m tools.originality_check --ours estimator --originals /tmp/est \
      --normalize-names --json report.json

It prints one line per run (`file:first-last  N tokens  ~ original:first-last`)
and a per-file summary, and exits 1 when it found any run (0 when none).
"""

import argparse
import collections
import io
import json
import keyword
import os
import re
import sys
import tokenize

_WORD = re.compile(r'\w+')
# Fallback for files that Python's tokenizer rejects (old Python 2 code).
_RAW_TOKEN = re.compile(r'\w+|[^\w\s]')
_MAX_HITS = 8
_SKIPPED = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING)

Run = collections.namedtuple(
    'Run', ['path', 'first_line', 'last_line', 'num_tokens', 'original', 'original_lines'])


def tokens_of(text, normalize_names=False):
  """Splits Python source into the tokens the check compares.

  Args:
    text: the file's source.
    normalize_names: replace every identifier that is not a keyword by `N`.

  Returns:
    A list of `(token, line_number)` pairs, line numbers 1-based.
  """
  try:
    return list(_python_tokens(text, normalize_names))
  except (tokenize.TokenError, SyntaxError, IndentationError):
    pass
  result = []
  for number, line in enumerate(text.splitlines(), 1):
    for token in _RAW_TOKEN.findall(line):
      result.append((_normalized(token, normalize_names), number))
  return result


def _python_tokens(text, normalize_names):
  for token in tokenize.generate_tokens(io.StringIO(text).readline):
    if token.type in _SKIPPED:
      continue
    if token.type in (tokenize.COMMENT, tokenize.STRING):
      # Words keep their line: a docstring's words land on the lines they sit on.
      for offset, line in enumerate(token.string.splitlines()):
        for word in _WORD.findall(line):
          yield word.lower(), token.start[0] + offset
    elif token.type == tokenize.NAME:
      yield _normalized(token.string, normalize_names), token.start[0]
    else:
      yield token.string, token.start[0]


def _normalized(token, normalize_names):
  if normalize_names and token.isidentifier() and not keyword.iskeyword(token):
    return 'N'
  return token


def python_files(paths):
  """Lists the `.py` files under each path (a path may be a file itself)."""
  found = []
  for path in paths:
    if os.path.isfile(path):
      found.append(path)
      continue
    if not os.path.isdir(path):
      raise ValueError('--ours/--originals: %r is neither a file nor a folder' % path)
    for root, dirs, files in os.walk(path):
      dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
      found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith('.py'))
  return found


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def _windows(tokens, window):
  words = [t for t, _ in tokens]
  for start in range(len(words) - window + 1):
    yield start, hash(tuple(words[start:start + window]))


def find_runs(ours, originals, window=8, min_tokens=40, min_lines=9, normalize_names=False):
  """Finds the runs of our files that the reference files share.

  Our windows are indexed first and the reference files are streamed past
  that index, so memory grows with our tree, not with theirs.

  Args:
    ours: paths of our `.py` files.
    originals: paths of the reference `.py` files.
    window: tokens per shingle.
    min_tokens: report a run of at least this many tokens ...
    min_lines: ... or one that spans at least this many lines.
    normalize_names: see `tokens_of`.

  Returns:
    A list of `Run`s, in file and line order. Each run is made of the windows
    one reference file shares (`original`; `original_lines` are the first
    and last lines of those windows there); where several reference files
    share a stretch, the longest run is kept.
  """
  if window < 1:
    raise ValueError('--window must be at least 1, got %d' % window)
  our_tokens = {path: tokens_of(_read(path), normalize_names) for path in ours}
  index = collections.defaultdict(list)
  for path, tokens in our_tokens.items():
    for start, key in _windows(tokens, window):
      index[key].append((path, start))
  # our path -> window start -> [(original path, its first line, its last line)]
  evidence = collections.defaultdict(lambda: collections.defaultdict(list))
  # Common idioms occur thousands of times; a few sightings of one are enough.
  sightings = collections.Counter()
  for original in originals:
    tokens = tokens_of(_read(original), normalize_names)
    for start, key in _windows(tokens, window):
      if key not in index or sightings[key] >= _MAX_HITS:
        continue
      sightings[key] += 1
      for path, our_start in index[key]:
        evidence[path][our_start].append(
            (original, tokens[start][1], tokens[start + window - 1][1]))
  runs = []
  for path, hits_at in evidence.items():
    candidates = []
    for original, starts in _starts_by_original(hits_at).items():
      for first, end in _joined(starts, window):
        hits = [h for s in range(first, end - window + 1) for h in hits_at.get(s, ())
                if h[0] == original]
        candidates.append(_run(path, our_tokens[path], first, end, hits))
    runs.extend(_longest_first(
        [r for r in candidates
         if r.num_tokens >= min_tokens or r.last_line - r.first_line + 1 >= min_lines]))
  return sorted(runs, key=lambda r: (r.path, r.first_line))


def _starts_by_original(hits_at):
  """{original path: sorted window starts of ours that it shares}.

  A run is built from one original's windows only, so idioms that many
  files share cannot chain unrelated matches into one long run.
  """
  by_original = collections.defaultdict(set)
  for start, hits in hits_at.items():
    for original, _, _ in hits:
      by_original[original].add(start)
  return {original: sorted(starts) for original, starts in by_original.items()}


def _longest_first(candidates):
  """Keeps the longest of overlapping runs (several originals may share a stretch)."""
  kept = []
  for run in sorted(candidates, key=lambda r: -r.num_tokens):
    if all(run.last_line < k.first_line or run.first_line > k.last_line for k in kept):
      kept.append(run)
  return kept


def _joined(starts, window):
  """Merges overlapping windows into (first token, last token + 1) spans."""
  spans = []
  for start in starts:
    if spans and start <= spans[-1][1]:
      spans[-1][1] = max(spans[-1][1], start + window)
    else:
      spans.append([start, start + window])
  return spans


def _run(path, tokens, first, end, hits):
  best = collections.Counter(original for original, _, _ in hits).most_common(1)[0][0]
  lines = [line for original, a, b in hits if original == best for line in (a, b)]
  return Run(path, tokens[first][1], tokens[end - 1][1], end - first, best,
             (min(lines), max(lines)))


def summarize(runs):
  """Per-file totals: `{path: {'runs': n, 'tokens': n, 'lines': n}}`."""
  totals = collections.OrderedDict()
  for run in runs:
    entry = totals.setdefault(run.path, {'runs': 0, 'tokens': 0, 'lines': 0})
    entry['runs'] += 1
    entry['tokens'] += run.num_tokens
    entry['lines'] += run.last_line - run.first_line + 1
  return totals


def _parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--ours', nargs='+', required=True, help='our files or folders')
  parser.add_argument('--originals', nargs='+', required=True,
                      help='reference files or folders (already on disk)')
  parser.add_argument('--window', type=int, default=8)
  parser.add_argument('--min-tokens', type=int, default=40)
  parser.add_argument('--min-lines', type=int, default=9)
  parser.add_argument('--normalize-names', action='store_true')
  parser.add_argument('--json', help='also write the runs to this file')
  return parser.parse_args(argv)


def main(argv=None):
  args = _parse_args(argv)
  runs = find_runs(python_files(args.ours), python_files(args.originals), args.window,
                   args.min_tokens, args.min_lines, args.normalize_names)
  for run in runs:
    print('%s:%d-%d  %d tokens  ~ %s:%d-%d' % (
        run.path, run.first_line, run.last_line, run.num_tokens, run.original,
        run.original_lines[0], run.original_lines[1]))
  print('\n%d run(s) in %d file(s)' % (len(runs), len(summarize(runs))))
  for path, entry in summarize(runs).items():
    print('  %-60s %3d runs %5d tokens %4d lines' % (
        path, entry['runs'], entry['tokens'], entry['lines']))
  if args.json:
    with open(args.json, 'w', encoding='utf-8') as f:
      json.dump([r._asdict() for r in runs], f, indent=1)
  return 1 if runs else 0


if __name__ == '__main__':
  sys.exit(main())
