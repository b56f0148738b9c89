"""The table and goal lines of `benchmarks/elastic_paired.py` (no flags, no TensorFlow).

Kept apart from the benchmark, which defines absl flags, so that a test imports it
beside the other benchmarks' modules in one process.

    lines = report([dict(order='fresh then elastic', fresh=30.0, join=29.1, leave=30.4,
                         restarts=0, join_secs=17.2, leaver_code=143)],
                   batch_size=8, workers=2, goal=0.95)
"""

from benchmarks import bench_util
from benchmarks import elastic_timeline as timeline


def report(repeats, batch_size, workers, goal):
  """The per-repeat table and one goal line per kind of change.

  Args:
    repeats: [dict(order, fresh, join, leave, restarts, join_secs, leaver_code)]; fresh,
      join and leave in global steps/sec, each window with `workers` workers.
    batch_size: examples per step of each task.
    workers: the workers of every timed window.
    goal: the ratio each change's window must reach against the fresh job's.

  Returns:
    The lines to print.
  """
  def ex(rate):
    return timeline.examples_per_task(rate, batch_size, workers)
  lines = ['| repeat | order | fresh: ex/s per task | after a join | ratio | after a leave | '
           'ratio | joiner start -> first step (s) | leaver exit | restart lines (kept) |',
           '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |']
  for i, r in enumerate(repeats):
    lines.append('| %d | %s | %.2f | %.2f | %.3f | %.2f | %.3f | %.1f | %s | %d |' % (
        i + 1, r['order'], ex(r['fresh']), ex(r['join']), r['join'] / r['fresh'],
        ex(r['leave']), r['leave'] / r['fresh'], r['join_secs'], r['leaver_code'],
        r['restarts']))
  fresh = [ex(r['fresh']) for r in repeats]
  for kind in ('join', 'leave'):
    lines.append(bench_util.ratio_line(
        'ex/s per task after a %s / a job started at %d workers' % (kind, workers),
        [ex(r[kind]) for r in repeats], fresh, goal=goal))
  return lines
