"""What killed writers leave behind, and its removal by the next run.

A writer that works under a temporary name (`file_io.temporary_name`, the partial outputs of
`create_pretraining_data`) removes it when it stops on an error or a signal; a killed one cannot.
Such names carry the writer's `<host>-<pid>`, so the next run for the same output removes what
processes of this host that no longer run left, with a warning. A process of another host (on a
shared file system) may still be writing, so its files are left alone.

Example:

>>> import tensorflow as tf
>>> from official_bert.common import file_io
>>> with tf.io.gfile.GFile("ram://debris_example/out.tmp-elsewhere-1-0a1b2c3d", "w") as f:
...   _ = f.write("a killed run's half output, maybe still written by its host")
>>> remove_dead_temporaries("ram://debris_example/out")
>>> tf.io.gfile.listdir("ram://debris_example")
['out.tmp-elsewhere-1-0a1b2c3d']
"""

import os
import socket

from absl import logging
import tensorflow as tf


def writer_id():
  """`<host>-<pid>` of this process: who wrote a temporary name, and whether it still runs."""
  return f"{socket.gethostname()}-{os.getpid()}"


def process_runs(pid):
  """Whether a process with this id exists on this host."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # it exists, under another user
    return True
  return True


def remove_if_dead(debris, writer, path):
  """Removes the file or folder `debris` of the writer `<host>-<pid>` if it no longer runs here.

  Args:
    debris: what the writer left.
    writer: its `writer_id()`.
    path: the output it was writing, for the messages.
  """
  writer_host, _, pid = writer.rpartition("-")
  if writer_host != socket.gethostname() or not pid.isdigit():
    return
  if process_runs(int(pid)):
    logging.warning("%s belongs to process %s, which still runs: is another run writing %s?",
                    debris, pid, path)
    return
  logging.warning("Removing %s, left by an interrupted run (process %s, no longer running).",
                  debris, pid)
  if tf.io.gfile.isdir(debris):
    tf.io.gfile.rmtree(debris)
  else:
    tf.io.gfile.remove(debris)


def remove_dead_temporaries(path):
  """Removes the `file_io.temporary_name`s of `path` that dead processes of this host left.

  Args:
    path: the file or folder written under temporary names (`<path>.tmp-<host>-<pid>-<hex>`).
  """
  path = os.fspath(path).rstrip("/")
  folder, prefix = os.path.dirname(path), os.path.basename(path) + ".tmp-"
  if not tf.io.gfile.isdir(folder or "."):
    return
  for entry in tf.io.gfile.listdir(folder or "."):
    entry = entry.rstrip("/")
    if entry.startswith(prefix):
      writer = entry[len(prefix):].rpartition("-")[0]
      remove_if_dead(os.path.join(folder, entry), writer, path)
