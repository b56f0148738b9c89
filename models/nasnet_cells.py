"""The cells NASNet-A and PNASNet-5 are stacked from, and what they share.

A cell (Zoph et al., 2017, https://arxiv.org/abs/1707.07012) reads two hidden
states, the output of the cell just before it and of the one before that,
and grows a list of states from them in five steps. Step i takes two states
from the list, applies one operation to each (a stack of separable
convolutions, a 3x3 pooling, or nothing), adds the two results and appends
the sum. The cell's output is the concatenation of the states no step read.
An architecture search picked the operations and which states each step
reads; `CellSpec` holds that choice as data:

    operations           ten names, a (left, right) pair per step:
                         'separable_KxK_N' (N separable KxK layers),
                         'avg_pool_3x3', 'max_pool_3x3', 'none'
    hiddenstate_indices  ten list positions, which states each step reads
                         (0: this cell's input through a 1x1 convolution,
                          1: the previous input, 2..: earlier steps' sums)
    used_hiddenstates    seven flags, 1 for a state some step consumed
                         (left out of the output concatenation)

Called with stride 2, a cell halves the size (NASNet's reduction cells,
PNASNet's strided cells): the operations that read the two inputs stride;
the rest see already halved maps.

Variables are named as in slim's NASNet checkpoints, under the cell's scope:
'1x1' and 'beginning_bn' (the input's projection), 'prev_1x1'/'prev_bn' or
'path1_conv', 'path2_conv', 'final_path_bn' (the previous input, matched in
depth or halved in size), then per step
'comb_iter_<i>/{left,right}/separable_KxK_<n>', 'bn_sep_KxK_<n>', '1x1',
'bn_1', and 'cell_output/reduction_<i>/...' for output states that still
need matching.

Usage:

    normal = nasnet_cells.NasNetCell(nasnet_cells.NASNET_A_NORMAL, num_conv_filters=168)
    with slim.arg_scope(...conv and batch norm settings...):
      out = normal(net, scope='cell_0', filter_scaling=1.0, stride=1,
                   prev_layer=previous, cell_index=2)

Differs on purpose:

* NHWC only, and no bounded (relu6) variant: the zoo's NASNet-A large and
  PNASNet-5 large models use neither.
* A cell's depth comes from static shapes, so images need a static height
  and width (as upstream, which also only supports a fixed-shape resizer).
"""

import collections

import tensorflow as tf
import tf_slim as slim

CellSpec = collections.namedtuple(
    'CellSpec', ['operations', 'hiddenstate_indices', 'used_hiddenstates'])

NASNET_A_NORMAL = CellSpec(
    operations=('separable_5x5_2', 'separable_3x3_2', 'separable_5x5_2', 'separable_3x3_2',
                'avg_pool_3x3', 'none', 'avg_pool_3x3', 'avg_pool_3x3',
                'separable_3x3_2', 'none'),
    hiddenstate_indices=(0, 1, 1, 1, 0, 1, 1, 1, 0, 0),
    used_hiddenstates=(1, 0, 0, 0, 0, 0, 0))

NASNET_A_REDUCTION = CellSpec(
    operations=('separable_5x5_2', 'separable_7x7_2', 'max_pool_3x3', 'separable_7x7_2',
                'avg_pool_3x3', 'separable_5x5_2', 'none', 'avg_pool_3x3',
                'separable_3x3_2', 'max_pool_3x3'),
    hiddenstate_indices=(0, 1, 0, 1, 0, 1, 3, 2, 2, 0),
    used_hiddenstates=(1, 1, 1, 0, 0, 0, 0))

# How drop path's keep probability is scheduled: `keep_prob` is reached by
# the last cell at `total_training_steps`; earlier cells and steps keep more.
DropPathSchedule = collections.namedtuple(
    'DropPathSchedule', ['keep_prob', 'total_num_cells', 'total_training_steps'])

_NUM_STEPS = 5


def reduction_cell_indices(num_cells, num_reduction_layers):
  """Positions (among the normal cells) where a reduction cell goes first.

  The reductions split the `num_cells` normal cells into equal runs, e.g.
  18 cells and 2 reductions -> [6, 12].
  """
  return [int(num_cells * float(k) / (num_reduction_layers + 1))
          for k in range(1, num_reduction_layers + 1)]


def _depth(net):
  return int(net.shape[3])


def _width(net):
  return int(net.shape[2])


def factorized_reduction(net, output_filters, stride):
  """Brings `net` to `output_filters` channels and divides its size by `stride`.

  With stride 1 a 1x1 convolution and batch norm ('path_conv', 'path_bn').
  With stride 2, two half-depth 1x1 convolutions of the strided map, one of
  it shifted by a pixel ('path1_conv', 'path2_conv'), so that no input pixel
  is skipped; concatenated, then batch norm ('final_path_bn').

  Args:
    net: float [B, H, W, C].
    output_filters: channels of the result.
    stride: 1 or 2.

  Returns:
    float [B, ceil(H / stride), ceil(W / stride), output_filters].
  """
  if stride == 1:
    net = slim.conv2d(net, output_filters, 1, scope='path_conv')
    return slim.batch_norm(net, scope='path_bn')
  strides = [1, stride, stride, 1]
  path1 = tf.nn.avg_pool2d(net, ksize=1, strides=strides, padding='VALID')
  path1 = slim.conv2d(path1, output_filters // 2, 1, scope='path1_conv')
  # Shift by one pixel (zeros enter at the bottom and right) so path2 samples
  # the pixels path1's stride steps over.
  shifted = tf.pad(net, [[0, 0], [0, 1], [0, 1], [0, 0]])[:, 1:, 1:, :]
  path2 = tf.nn.avg_pool2d(shifted, ksize=1, strides=strides, padding='VALID')
  path2 = slim.conv2d(path2, output_filters - output_filters // 2, 1, scope='path2_conv')
  net = tf.concat([path1, path2], axis=3)
  return slim.batch_norm(net, scope='final_path_bn')


def drop_path(net, keep_prob):
  """Zeroes whole examples of `net` with probability 1 - keep_prob, scales the rest.

  Args:
    net: float [B, H, W, C].
    keep_prob: float scalar (Python or tensor).
  """
  batch_size = tf.shape(net)[0]
  keep_mask = tf.floor(keep_prob + tf.random.uniform([batch_size, 1, 1, 1], dtype=tf.float32))
  return net * tf.cast(1.0 / keep_prob, net.dtype) * tf.cast(keep_mask, net.dtype)


def scheduled_keep_prob(schedule, cell_index):
  """Drop path's keep probability for the cell at `cell_index` now.

  Deeper cells drop more (linearly in (cell_index + 1) / total_num_cells),
  and every cell drops more as training goes on (linearly in the global
  step, up to `total_training_steps`).

  When the graph has no global step yet, this creates it in the current
  variable scope, as slim's NASNet does (the OD API's variable lists show
  it at 'FirstStageFeatureExtractor/cell_stem_0/comb_iter_0/left/global_step').
  """
  depth_ratio = (cell_index + 1) / float(schedule.total_num_cells)
  keep_prob = 1.0 - depth_ratio * (1.0 - schedule.keep_prob)
  step = tf.cast(tf.compat.v1.train.get_or_create_global_step(), tf.float32)
  progress = tf.minimum(1.0, step / schedule.total_training_steps)
  return 1.0 - progress * (1.0 - keep_prob)


def parse_operation(operation):
  """('separable' | 'avg' | 'max' | 'none', kernel size, layers) of an operation name."""
  if operation == 'none':
    return 'none', 1, 0
  parts = operation.split('_')
  kernel_height, kernel_width = parts[1 if parts[0] == 'separable' else 2].split('x')
  if kernel_height != kernel_width:
    raise ValueError('operation %r: only square kernels are supported' % operation)
  if parts[0] == 'separable':
    return 'separable', int(kernel_height), int(parts[2])
  if parts[0] in ('avg', 'max') and parts[1] == 'pool':
    return parts[0], int(kernel_height), 1
  raise ValueError('operation %r: expected separable_KxK_N, avg_pool_KxK, max_pool_KxK '
                   'or none' % operation)


def separable_stack(net, filters, kernel_size, num_layers, stride):
  """`num_layers` x (relu, separable conv, batch norm); only the first strides."""
  for layer in range(1, num_layers + 1):
    net = tf.nn.relu(net)
    net = slim.separable_conv2d(net, filters, kernel_size, depth_multiplier=1, stride=stride,
                                scope='separable_{0}x{0}_{1}'.format(kernel_size, layer))
    net = slim.batch_norm(net, scope='bn_sep_{0}x{0}_{1}'.format(kernel_size, layer))
    stride = 1
  return net


class NasNetCell(object):
  """One NASNet-style cell type (normal, reduction, or PNASNet's), callable per layer.

  Args:
    spec: a `CellSpec`.
    num_conv_filters: the network's base depth; a call's `filter_scaling`
      multiplies it into the depth of every operation.
    drop_path_schedule: a `DropPathSchedule`, or None for no drop path
      (evaluation, or a network trained without it).
  """

  def __init__(self, spec, num_conv_filters, drop_path_schedule=None):
    if len(spec.operations) != 2 * _NUM_STEPS or len(spec.hiddenstate_indices) != 2 * _NUM_STEPS:
      raise ValueError('spec: expected %d operations and hiddenstate_indices, got %d and %d'
                       % (2 * _NUM_STEPS, len(spec.operations), len(spec.hiddenstate_indices)))
    self._spec = spec
    self._num_conv_filters = num_conv_filters
    self._drop_path_schedule = drop_path_schedule

  @property
  def drop_path_schedule(self):
    """The `DropPathSchedule`, or None when the cell has no drop path."""
    return self._drop_path_schedule

  def __call__(self, net, scope, filter_scaling=1.0, stride=1, prev_layer=None, cell_index=-1):
    """Builds the cell in variable scope `scope`.

    Args:
      net: float [B, H, W, C], the previous cell's output.
      scope: the cell's variable scope name (e.g. 'cell_3', 'reduction_cell_0').
      filter_scaling: operation depth = int(num_conv_filters * filter_scaling).
      stride: 2 to halve the size (a reduction cell), else 1.
      prev_layer: the output of the cell before the previous one, or None
        (then `net` is both inputs).
      cell_index: the cell's position in the whole network, stem cells
        included (for drop path's schedule).

    Returns:
      float [B, H / stride, W / stride, k * depth], k = unused states.
    """
    filters = int(self._num_conv_filters * filter_scaling)
    with tf.compat.v1.variable_scope(scope):
      states = self._cell_inputs(net, prev_layer, filters)
      for step in range(_NUM_STEPS):
        with tf.compat.v1.variable_scope('comb_iter_%d' % step):
          states.append(self._step(states, step, filters, stride, cell_index))
      with tf.compat.v1.variable_scope('cell_output'):
        return self._concat_unused(states)

  def _cell_inputs(self, net, prev_layer, filters):
    """[the input projected to `filters`, the previous input matched to it]."""
    prev_layer = self._match_previous(prev_layer, net, filters)
    net = tf.nn.relu(net)
    net = slim.conv2d(net, filters, 1, scope='1x1')
    net = slim.batch_norm(net, scope='beginning_bn')
    return [net, prev_layer]

  def _match_previous(self, prev_layer, net, filters):
    """`prev_layer` at `net`'s size and `filters` deep (or `net` when None)."""
    if prev_layer is None:
      return net
    if _width(prev_layer) != _width(net):
      return factorized_reduction(tf.nn.relu(prev_layer), filters, stride=2)
    if _depth(prev_layer) != filters:
      prev_layer = slim.conv2d(tf.nn.relu(prev_layer), filters, 1, scope='prev_1x1')
      return slim.batch_norm(prev_layer, scope='prev_bn')
    return prev_layer

  def _step(self, states, step, filters, stride, cell_index):
    """One combination: two operations on two chosen states, summed."""
    outputs = []
    for side, position in (('left', 2 * step), ('right', 2 * step + 1)):
      state_index = self._spec.hiddenstate_indices[position]
      # Only the cell's two inputs are at full size; later states are reduced.
      op_stride = stride if state_index < 2 else 1
      with tf.compat.v1.variable_scope(side):
        outputs.append(self._apply(states[state_index], self._spec.operations[position],
                                   filters, op_stride, cell_index))
    with tf.compat.v1.variable_scope('combine'):
      return outputs[0] + outputs[1]

  def _apply(self, net, operation, filters, stride, cell_index):
    """One operation of a step, then drop path (except after 'none')."""
    kind, kernel_size, num_layers = parse_operation(operation)
    input_filters = _depth(net)
    if kind == 'separable':
      net = separable_stack(net, filters, kernel_size, num_layers, stride)
    elif kind == 'none':
      if stride > 1 or input_filters != filters:
        net = slim.conv2d(tf.nn.relu(net), filters, 1, stride=stride, scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
      return net
    else:
      pool = slim.avg_pool2d if kind == 'avg' else slim.max_pool2d
      net = pool(net, kernel_size, stride=stride, padding='SAME')
      if input_filters != filters:
        net = slim.conv2d(net, filters, 1, scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
    if self._drop_path_schedule is not None:
      net = drop_path(net, scheduled_keep_prob(self._drop_path_schedule, cell_index))
    return net

  def _concat_unused(self, states):
    """Concatenates the unused states, first matching them to the last one."""
    used = self._spec.used_hiddenstates
    if len(used) != len(states):
      raise ValueError('spec.used_hiddenstates: expected %d flags, got %d'
                       % (len(states), len(used)))
    last = states[-1]
    unused = []
    for index, state in enumerate(states):
      if used[index]:
        continue
      if _width(state) != _width(last) or _depth(state) != _depth(last):
        stride = 2 if _width(state) != _width(last) else 1
        with tf.compat.v1.variable_scope('reduction_%d' % index):
          state = factorized_reduction(state, _depth(last), stride)
      unused.append(state)
    return tf.concat(unused, axis=3)
