"""Reading and reporting `benchmarks/ps_failover.py`'s runs: log patterns, per-kill rows.

The lines it reads are those the chief and a restarted ps log on a ps loss
(`deployment/shard_restore.py`, `deployment/fault_tolerance.py`,
`deployment/cluster_check.py`). No flags and no TensorFlow here, so a test can
import it beside other benchmarks:

    restored = stamped_lines('/tmp/x/chief0.log', RESTORED, since=kill_time)
    summarize({'snapshots': rows}, snapshot_secs=5, recovery_goal_secs=5)

`floor_report` prints `benchmarks/session_floor.py`'s probes (here for the same reason).
"""

import collections
import re
import statistics
import time

from benchmarks import elastic_timeline as timeline

RESTORED = re.compile(
    r'recovered from a lost peer: restored global step (\d+), (\d+) step\(s\) lost')
# The steps are left out when the global step's own ps was lost (no step to count from).
FROM_SNAPSHOT = re.compile(
    r'restored the \d+ variables of /job:ps/task:(\d+) from its snapshot on \S+ '
    r'\(global step (\d+): ([0-9.]+) s(?:, (\d+) steps)? old\)')
FROM_CHECKPOINT = re.compile(
    r'restored the \d+ variables of /job:ps/task:(\d+) from \S*model\.ckpt-(\d+)')
KEPT = re.compile(r'kept the current values of /job:ps/task:(\d+)')
PS_BACK = re.compile(r"cluster of task ps:(\d+) matches the chief's")

# RESULTS.md's rule (`bench_util.MIN_REPEATS_TO_RESOLVE`, kept equal by
# tests/benchmarks/test_ps_failover.py; not imported, as bench_util imports TensorFlow):
# every kill is one repeat, and fewer than this many leave a goal "not resolved".
MIN_KILLS_TO_RESOLVE = 5


def stamped_messages(path, since):
  """[(time, message)] of the absl lines of `path` stamped at or after `since`."""
  year = time.localtime().tm_year
  with open(path, errors='replace') as log:
    stamped = (timeline.absl_time(line, year) for line in log)
    return [line for line in stamped if line and line[0] >= since]


def matching(messages, pattern):
  """[(time, match)] of the `stamped_messages` that `pattern` finds something in."""
  found = ((stamp, pattern.search(message)) for stamp, message in messages)
  return [(stamp, match) for stamp, match in found if match]


def stamped_lines(path, pattern, since):
  """[(time, match)] of the absl lines of `path` after `since` matching `pattern`."""
  return matching(stamped_messages(path, since), pattern)


def print_row(name, number, row):
  if row['age_secs'] is not None:
    age = '%.1f s, %d steps old at the kill; %.1f s when restored' % (
        row['age_secs'], row['age_steps'], row['age_logged_secs'])
  else:
    age = '%s steps old at the kill' % row['age_steps']
  print('%s kill %d: ps %d; back after %.1f s; next step %.2f s after the kill, %.2f s after '
        'the ps was back; shard from %s (%s); other ps kept: %s; global step rolled back %s; '
        'loss before %.3f, after %.3f' % (
            name, number, row['ps'], row['back_secs'], row['kill_to_step'],
            row['back_to_step'], row['source'], age, row['other_kept'], row['rollback'],
            row['loss'][0], row['loss'][1]), flush=True)


def percentile(values, fraction):
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def summarize(phases, snapshot_secs, recovery_goal_secs):
  """Prints the per-phase table and the goal lines of the snapshots phase.

  Each goal line counts the kills that reached the goal and gives `verdict`'s label.
  """
  print('\n| phase | kills | back -> next step p50 / p99 s | kill -> next step p50 / p99 s '
        '| shard source | shard age at the kill, max s / steps | other ps kept '
        '| rollback (ps 1 lost) |')
  print('| --- | ---: | --- | --- | --- | --- | --- | --- |')
  for name, rows in phases.items():
    if not rows:
      print('| %s | 0 | - | - | - | - | - | - |' % name)
      continue
    back = [r['back_to_step'] for r in rows]
    kill = [r['kill_to_step'] for r in rows]
    ages = [r['age_secs'] for r in rows if r['age_secs'] is not None]
    steps = [r['age_steps'] for r in rows if r['age_steps'] is not None]
    sources = collections.Counter(r['source'].split(' ')[0] for r in rows)
    print('| %s | %d | %.2f / %.2f | %.2f / %.2f | %s | %s | %d of %d | %s |' % (
        name, len(rows), percentile(back, 0.5), percentile(back, 0.99),
        percentile(kill, 0.5), percentile(kill, 0.99),
        ', '.join('%s %d' % kv for kv in sorted(sources.items())),
        '%s / %s' % ('%.1f' % max(ages) if ages else '-', max(steps) if steps else '-'),
        sum(r['other_kept'] for r in rows), len(rows),
        ' '.join(str(r['rollback']) for r in rows if r['ps'] == 1)))
  rows = phases.get('snapshots') or []
  if not rows:
    print('snapshots phase: no kill measured: every goal not resolved')
    return
  checks = [
      ('restored shard <= %.0f s old' % (2 * snapshot_secs),
       [r['age_secs'] is not None and r['age_secs'] <= 2 * snapshot_secs for r in rows]),
      ('untouched shard kept', [r['other_kept'] for r in rows]),
      ('no global-step rollback when ps 1 is lost',
       [r['rollback'] == 0 for r in rows if r['ps'] == 1]),
      ('ps back -> next step <= %.0f s' % recovery_goal_secs,
       [r['back_to_step'] <= recovery_goal_secs for r in rows]),
  ]
  for text, results in checks:
    print('goal %s: %d of %d kills: %s' % (text, sum(results), len(results), verdict(results)))


def verdict(results):
  """'met', 'missed' or 'not resolved' for one goal, one bool per kill (True: reached).

  RESULTS.md's rule: met only when every kill reaches the goal and missed only when
  none does, both only over at least MIN_KILLS_TO_RESOLVE kills; otherwise (a mix,
  or too few kills) not resolved.
  """
  if len(results) < MIN_KILLS_TO_RESOLVE:
    return 'not resolved'
  if all(results):
    return 'met'
  if not any(results):
    return 'missed'
  return 'not resolved'


def floor_report(rows, goal_secs):
  """Prints session_floor's probes and the floor they give against the recovery goal.

  Args:
    rows: one dict per probe: probe (its number), init_secs (new session -> local
      init done), first_secs (new session -> first step done), second_secs (the
      next step alone), load (the load average then).
    goal_secs: the recovery goal (ps back -> next global step), seconds.
  """
  print('| probe | new session -> local init done s | -> first step done s | second step s '
        '| load average |')
  print('| ---: | ---: | ---: | ---: | ---: |')
  for row in rows:
    print('| %d | %.2f | %.2f | %.2f | %.1f |' % (row['probe'], row['init_secs'],
                                                 row['first_secs'], row['second_secs'],
                                                 row['load']))
  firsts = sorted(row['first_secs'] for row in rows)
  seconds = [row['second_secs'] for row in rows]
  over = sum(1 for f in firsts if f > goal_secs)
  print('floor (a new session to its first step done): p50 %.2f s, p99 %.2f s, min %.2f s; '
        'a steady step p50 %.2f s; above the %g s recovery goal in %d of %d probes' % (
            statistics.median(firsts), percentile(firsts, 0.99), firsts[0],
            statistics.median(seconds), goal_secs, over, len(firsts)))
