"""Sharing the shards of a pre-training corpus between this process and worker processes.

A worker process has to import TensorFlow and build the tokenizer before its first shard, which
takes seconds. Workers are therefore started (with `spawn`: forking a process that may run
TensorFlow is unsafe) without waiting for them, and this process processes shards itself until
they report ready; from then on it hands them shards and still takes one itself whenever every
ready worker already has two. Results come back in shard order. A small corpus is done before the
workers are up, and they are simply stopped.

With a single process, a background thread tokenizes the next shard while the current one is
built and written (`ShardProcessor.process_in_order`).

Workers never outlive this process: leaving the `ShardRunner` (on an error or a signal turned into
an exception) terminates them, and a worker whose parent was killed outright exits by itself, as
it watches the pipe that `multiprocessing` keeps open to its parent. Workers ignore SIGINT: a
Ctrl-C reaches the whole process group, and this process stops them.
"""

import multiprocessing
import os
import queue
import signal
import threading
import traceback

from absl import logging

from official_bert.common.errors import UserError

# A worker has at most this many shards queued or in progress.
_SHARDS_PER_WORKER = 2
# Seconds between checks that the workers are still alive while waiting for a result.
_POLL_S = 1.0


class ShardRunner:
  """Runs `writer.ShardProcessor(*processor_args).process` on a stream of shards.

  Args:
    num_workers: processes that work on shards, this one included.
    processor_args: the arguments of `ShardProcessor`.
    work_here: also process shards in this process (when workers are busy or not yet ready);
      False waits for the workers instead.

  Use as a context manager; leaving it stops the workers.
  """

  def __init__(self, num_workers, processor_args, work_here=True):
    self._num_helpers = max(0, num_workers - 1)
    self._work_here = work_here or not self._num_helpers
    self._processor_args = processor_args
    self._processor = None
    self._workers = []
    self.shards_here = 0
    self.shards_in_workers = 0
    # Workers report ready once; `run_in_order` may be called again (one round after another).
    self._ready = 0

  def __enter__(self):
    if self._num_helpers:
      context = multiprocessing.get_context("spawn")
      self._tasks = context.Queue()
      self._results = context.Queue()
      self._workers = [
          context.Process(target=_worker_main, daemon=True,
                          args=(self._processor_args, self._tasks, self._results))
          for _ in range(self._num_helpers)]
      for worker in self._workers:
        worker.start()
      logging.info("Started %d worker processes: %s.", len(self._workers),
                   ", ".join(str(w.pid) for w in self._workers))
    return self

  def __exit__(self, *exc_info):
    for worker in self._workers:
      worker.terminate()
    for worker in self._workers:
      worker.join()
    if self._workers:
      for q in (self._tasks, self._results):
        q.cancel_join_thread()
        q.close()

  def run_in_order(self, shards):
    """Yields the `ShardResult` of each shard, in shard order."""
    if not self._num_helpers:
      for result in self.processor_here().process_in_order(shards):
        self.shards_here += 1
        yield result
      return
    self._done = {}
    self._in_flight = 0
    next_index = 0
    for shard in shards:
      self._collect(block=len(self._done) >= 2 * _SHARDS_PER_WORKER * (self._num_helpers + 1))
      while not self._work_here and self._in_flight >= _SHARDS_PER_WORKER * self._num_helpers:
        self._collect(block=True)
      if not self._work_here or self._in_flight < _SHARDS_PER_WORKER * self._ready:
        self._tasks.put(shard)
        self._in_flight += 1
      else:
        self._done[shard.index] = self._process_here(shard)
      while next_index in self._done:
        yield self._done.pop(next_index)
        next_index += 1
    while self._in_flight or next_index in self._done:
      if next_index not in self._done:
        self._collect(block=True)
        continue
      yield self._done.pop(next_index)
      next_index += 1

  @property
  def num_worker_processes(self):
    """The processes started besides this one."""
    return self._num_helpers

  def _process_here(self, shard):
    self.shards_here += 1
    return self.processor_here().process(shard)

  def processor_here(self):
    """The `writer.ShardProcessor` of this process, built on first use."""
    if self._processor is None:
      from official_bert.pretraining import writer  # pylint: disable=g-import-not-at-top
      self._processor = writer.ShardProcessor(*self._processor_args)
    return self._processor

  def _collect(self, block):
    """Takes the messages the workers have sent; with `block`, waits for at least one."""
    while self._workers:
      try:
        kind, payload = self._results.get(block=block, timeout=_POLL_S if block else None)
      except queue.Empty:
        if not block:
          return
        dead = [w for w in self._workers if w.exitcode is not None]
        if dead:
          raise RuntimeError(
              f"a pre-training data worker (process {dead[0].pid}) died "
              f"({_exit_reason(dead[0].exitcode)}); out of memory? Try fewer --num_workers or a "
              "smaller shard size.") from None
        continue
      if kind == "error":
        raise RuntimeError(f"a pre-training data worker failed:\n{payload}")
      if kind == "user_error":
        raise UserError(payload)
      if kind == "ready":
        self._ready += 1
        logging.info("Worker process %d is ready.", payload)
      else:
        self._done[payload.index] = payload
        self._in_flight -= 1
        self.shards_in_workers += 1
      block = False


def _exit_reason(exitcode):
  if exitcode < 0:
    return f"killed by {signal.Signals(-exitcode).name}"
  return f"exit code {exitcode}"


def _exit_with_parent():
  """Ends this worker when its parent is gone, even killed by SIGKILL.

  The parent holds the write end of a pipe to each worker (`multiprocessing.parent_process()`'s
  sentinel); its death closes it, which `join` sees at once. Without this, a worker would wait on
  the task queue forever, as it holds that queue's write end itself.
  """
  multiprocessing.parent_process().join()
  os._exit(1)  # pylint: disable=protected-access


def _worker_main(processor_args, tasks, results):
  """The loop of a worker process: build the processor, report ready, process shards."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  threading.Thread(target=_exit_with_parent, daemon=True).start()
  try:
    from official_bert.pretraining import writer  # pylint: disable=g-import-not-at-top
    processor = writer.ShardProcessor(*processor_args)
    results.put(("ready", os.getpid()))
    while True:
      shard = tasks.get()
      results.put(("result", processor.process(shard)))
  except UserError as error:
    # The user's to fix (a full disk, say): one line, as in this process.
    results.put(("user_error", str(error)))
  except Exception:  # pylint: disable=broad-except
    results.put(("error", traceback.format_exc()))
