"""Progress of a training run: absl log lines and TensorBoard scalars."""

import math
import time

from absl import logging
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

# What TensorBoard's scalar dashboard looks for; written with TensorFlow's own `tf.summary.write`
# so that logging needs no TensorBoard installation (only viewing does).
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


class Progress:
  """Reports step, losses, metrics, learning rate, throughput and the time left.

  Args:
    summary_dir: TensorBoard event directory, or None to write no summaries (non-chief workers).
    num_steps: the step training ends at (for the ETA).
    start_step: the step training starts or resumes at.
  """

  def __init__(self, summary_dir, num_steps, start_step):
    self.num_steps = num_steps
    self.last_step = start_step
    self.last_time = time.monotonic()
    self.writer = (tf.summary.create_file_writer(summary_dir) if summary_dir
                   else tf.summary.create_noop_writer())

  def report(self, step, values, examples, learning_rate):
    """Logs one line and writes the scalars of `values` at `step`.

    Args:
      step: the global step reached.
      values: dict of floats (losses and metrics, averaged since the last report).
      examples: examples trained on since the last report, all replicas together.
      learning_rate: the current learning rate.

    Returns:
      The examples per second since the last report.
    """
    now = time.monotonic()
    seconds, steps = now - self.last_time, step - self.last_step
    examples_per_second = float(examples) / seconds if seconds > 0 else 0.0
    remaining = (self.num_steps - step) * seconds / steps if steps else 0.0
    logging.info("step %d/%d  %s  learning_rate %.3g  %.1f examples/s  ETA %s", step,
                 self.num_steps, "  ".join(f"{k} {v:.4g}" for k, v in values.items()),
                 learning_rate, examples_per_second, _duration(remaining))
    with self.writer.as_default(step=step):
      _write(dict(values, learning_rate=learning_rate, examples_per_second=examples_per_second))
    self.writer.flush()
    self.last_step, self.last_time = step, now
    return examples_per_second


def write_scalars(summary_dir, step, values):
  """Writes `values` (dict of floats) as TensorBoard scalars at `step`, e.g. evaluation results."""
  writer = tf.summary.create_file_writer(summary_dir)
  with writer.as_default(step=step):
    _write(values)
  writer.close()


def _write(values):
  for name, value in values.items():
    tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def _duration(seconds):
  if not math.isfinite(seconds):
    return "?"
  minutes, seconds = divmod(int(seconds), 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}:{minutes:02d}:{seconds:02d}"
