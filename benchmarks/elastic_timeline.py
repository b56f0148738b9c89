"""Reading the task logs of `benchmarks/elastic.py`: steps on one clock, gaps, rates, loss.

Every task of the measured jobs is a `python -m trainer.train` process run with
`log_every_n_steps: 1`, so it logs each global step it saw, as absl formats it:

    I1126 23:40:01.123456 140012 training_loop.py:163] global step 812, loss = 0.0431, ...

The stamp is the task's wall clock, and all tasks run on one machine (or in network
namespaces of one machine), so the lines of every task merge into one timeline:

    log = TaskLog('/tmp/x/worker1.log')
    log.update()                      # reads what was appended since the last call
    advances = merged_advances([log.progress, chief.progress])
    window_rate(advances, a, b)       # global steps/sec between two times
    longest_gap(advances, a, b)       # the longest time the global step stood still

No TensorFlow here: it only reads text.
"""

import bisect
import math
import re
import time

# absl's prefix: severity, MMDD, HH:MM:SS.micro, thread id, file:line]
_ABSL_LINE = re.compile(
    r'^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+\d+\s+[^\]]*\] (.*)$')
_PROGRESS = re.compile(r'global step (\d+), loss = ([0-9.naifNAIF+-]+)')
_MEMBERSHIP = re.compile(r'worker:(\d+) (joined|left) \((\d+) workers\)')
# A task that was neither added nor removed must show none of these ('Retrying training!':
# tf-slim's Supervisor after an error ended its session, before it starts another).
RESTART_MARKS = re.compile(
    r'starting a new session on the training graph|rebuilding the session|creating a new session|'
    r'recovered from a lost peer|Retrying training!|Traceback \(most recent call last\)')


def absl_time(line, year):
  """The Unix time and message of one absl log line.

  Args:
    line: a log line.
    year: the year to place the stamp in (absl's prefix has none).

  Returns:
    (seconds since the epoch, message), or None for a line without the prefix.
    The stamp is local time, as absl writes it.
  """
  match = _ABSL_LINE.match(line)
  if not match:
    return None
  month, day, hour, minute, second, micro, message = match.groups()
  stamp = time.mktime((year, int(month), int(day), int(hour), int(minute), int(second),
                       0, 0, -1))
  return stamp + int(micro) / 1e6, message


class TaskLog(object):
  """The parsed log of one task process, read incrementally.

  Attributes:
    progress: [(time, global step, loss)] of its progress lines, in log order.
    restarts: [(time, text)] of lines matching RESTART_MARKS.
    membership: [(time, worker index, 'joined'|'left', count)] (the chief's lines).
    sessions: how many training sessions it started (tf-slim's 'Starting Session.').
    left: whether it told the chief that it left.
  """

  def __init__(self, path):
    self.path = path
    self._offset = 0
    self._partial = ''
    self._year = time.localtime().tm_year
    self.progress = []
    self.restarts = []
    self.membership = []
    self.sessions = 0
    self.left = False

  def update(self):
    """Parses the lines appended since the last call; returns how many were complete."""
    try:
      with open(self.path, encoding='utf-8', errors='replace') as f:
        f.seek(self._offset)
        text = f.read()
        self._offset = f.tell()
    except FileNotFoundError:
      return 0
    lines = (self._partial + text).split('\n')
    self._partial = lines.pop()
    for line in lines:
      self._parse(line)
    return len(lines)

  def _parse(self, line):
    stamped = absl_time(line, self._year)
    if RESTART_MARKS.search(line):
      self.restarts.append((stamped[0] if stamped else None, line.strip()[:200]))
    if stamped is None:
      return
    stamp, message = stamped
    if message.startswith('Starting Session.'):
      self.sessions += 1
    elif message.startswith('told the chief that worker') and message.endswith(' left'):
      self.left = True
    match = _PROGRESS.search(message)
    if match:
      self.progress.append((stamp, int(match.group(1)), float(match.group(2))))
      return
    match = _MEMBERSHIP.search(message)
    if match:
      self.membership.append((stamp, int(match.group(1)), match.group(2),
                              int(match.group(3))))

  def first_step_time(self):
    """Time of its first progress line (None before it trained)."""
    return self.progress[0][0] if self.progress else None

  def last_step_time(self):
    """Time of its last progress line (None if it never trained)."""
    return self.progress[-1][0] if self.progress else None


def merged_advances(progress_lists):
  """The moments the job's global step moved forward, over every task's lines.

  Args:
    progress_lists: per task, [(time, global step, loss)].

  Returns:
    [(time, step)] sorted by time, keeping a line only when its step is past every
    step logged before it (by any task): the job's progress as one sequence.
  """
  merged = sorted((t, step) for lines in progress_lists for t, step, _ in lines)
  advances, top = [], -1
  for t, step in merged:
    if step > top:
      advances.append((t, step))
      top = step
  return advances


def step_at(advances, when):
  """The highest global step logged at or before `when` (0 before the first)."""
  index = bisect.bisect_right(advances, (when, math.inf))
  return advances[index - 1][1] if index else 0


def window_rate(advances, start, end):
  """Global steps/sec between two times (the job's steps, whoever made them).

  Returns:
    (steps at `end` - steps at `start`) / (end - start); 0.0 for an empty window.
  """
  if end <= start:
    return 0.0
  return (step_at(advances, end) - step_at(advances, start)) / (end - start)


def longest_gap(advances, start, end):
  """The longest time inside [start, end] during which the global step did not move.

  Args:
    advances: from `merged_advances`.
    start, end: the interval (Unix times).

  Returns:
    (seconds, time the gap began). A gap counts from the last advance at or before
    `start` (or `start`) to the next advance, and the last one runs to `end`, so a job
    that stopped shows as one long gap.
  """
  index = bisect.bisect_right(advances, (start, math.inf))
  previous = advances[index - 1][0] if index else start
  best, began = 0.0, previous
  for t, _ in advances[index:]:
    if t > end:
      break
    if t - previous > best:
      best, began = t - previous, previous
    previous = t
  if end - previous > best:
    best, began = end - previous, previous
  return best, began


def task_rate(progress, start, end):
  """A task's own steps/sec inside (start, end] (its progress lines there / seconds)."""
  if end <= start:
    return 0.0
  return sum(1 for t, _, _ in progress if start < t <= end) / (end - start)


def examples_per_task(rate, batch_size, workers):
  """Examples/sec per training task (the chief and `workers` workers) of a job at `rate`
  global steps/sec of `batch_size` examples each."""
  return rate * batch_size / (workers + 1)


def losses_by_step(progress_lists, last_step=None):
  """[(global step, loss)] of every task's lines, sorted by step, up to `last_step`."""
  pairs = sorted((step, loss) for lines in progress_lists for _, step, loss in lines)
  if last_step is not None:
    pairs = [(s, l) for s, l in pairs if s <= last_step]
  return pairs


def mean_loss(pairs, low, high):
  """Mean loss of the (step, loss) pairs with low < step <= high (NaN if none)."""
  values = [l for s, l in pairs if low < s <= high]
  return sum(values) / len(values) if values else float('nan')


def loss_curve(pairs, total_steps, buckets):
  """Mean loss in each of `buckets` equal global-step ranges of 0..total_steps."""
  edges = [total_steps * i / buckets for i in range(buckets + 1)]
  return [mean_loss(pairs, edges[i], edges[i + 1]) for i in range(buckets)]


def schedule_sizes(schedule, phase_secs, duration_secs):
  """Worker counts of consecutive phases: `schedule` cycled to fill the duration.

  A cycle that ends where it starts (1,3,2,4,1) does not repeat that size on
  wrapping: 1,3,2,4,1,3,2,4,1,3 for 10 phases.

  Returns:
    [workers] of max(1, duration_secs // phase_secs) phases (at least the schedule
    once when the duration is shorter).
  """
  cycle = list(schedule)
  if len(cycle) > 1 and cycle[-1] == cycle[0]:
    cycle = cycle[:-1]
  count = max(int(duration_secs // phase_secs), 1)
  if count < len(schedule):
    count = len(schedule)
  return [cycle[i % len(cycle)] for i in range(count)]


def churn_sizes(low, high, phase_secs, duration_secs):
  """Worker counts that move by one every phase: low, low+1, ..., high, high-1, ...

  Each change is one worker joining or leaving; the walk bounces between `low` and
  `high`.
  """
  count = max(int(duration_secs // phase_secs), 2)
  sizes, size, direction = [], low, 1
  for _ in range(count):
    sizes.append(size)
    if not low <= size + direction <= high:
      direction = -direction
    size += direction
  return sizes
