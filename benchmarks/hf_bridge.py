"""The TensorFlow side of the Hugging Face rows of the benchmarks: PyTorch runs in its own process.

PyTorch and `transformers` are no dependencies of this package; the benchmarks run them with the
Python of another environment (`--torch_python`), which imports neither TensorFlow nor this
package, and hand it this package's weights under the Hugging Face names
(`official_bert.checkpoints.hf_to_original` read backwards):

* `run_torch`: one job in, one JSON answer out (`torch_serving.py`);
* `TorchProcess`: a process that stays up and answers request after request
  (`torch_pretraining.py`), so that its timed windows can take turns with TensorFlow's.
"""

import importlib.util
import json
import subprocess
import sys

import numpy as np

from official_bert.checkpoints import hf_to_original, tf1


def find_torch_python(torch_python=None):
  """The Python to run PyTorch with: `torch_python`, else this one if it has torch and
  transformers, else None."""
  if torch_python:
    return torch_python
  if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
    return sys.executable
  return None


def run_torch(python, script, job):
  """Runs `script` with `python` on `job` (JSON on stdin); returns its JSON answer."""
  run = subprocess.run([python, str(script)], input=json.dumps(job), capture_output=True,
                       text=True, check=False)
  if run.returncode:
    raise RuntimeError(f"The PyTorch process ({script}) failed:\n{run.stderr[-3000:]}")
  return json.loads(run.stdout)


class TorchProcess:
  """`script` run by `python`, answering one JSON line for each JSON line it is sent.

  Args:
    python: the Python of an environment with torch and transformers.
    script: the PyTorch side.
  """

  def __init__(self, python, script):
    self.script = script
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
        [python, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)

  def ask(self, request):
    """Sends `request`; returns the answer, or raises with the process's last words."""
    try:
      self.process.stdin.write(json.dumps(request) + "\n")
      self.process.stdin.flush()
      line = self.process.stdout.readline()
    except BrokenPipeError:
      line = ""
    if not line:
      self.process.kill()
      raise RuntimeError(f"The PyTorch process ({self.script}) failed:\n"
                         f"{self.process.stderr.read()[-3000:]}")
    return json.loads(line)

  def close(self):
    """Ends the process (it exits at the end of its input)."""
    self.process.stdin.close()
    self.process.wait()
    self.process.stdout.close()
    self.process.stderr.close()


def hf_weights(model, shapes):
  """The weights of `model` (an encoder or a pre-trainer) under the Hugging Face names of
  `shapes` (name: shape); names with no counterpart (buffers, tied copies) are left out."""
  original = tf1.get_original_weights(model)
  weights = {}
  for name, shape in shapes.items():
    # A probe with distinct values: the renaming tells the original name and whether the
    # Hugging Face layout is the transpose of the original one.
    probe = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    renamed = hf_to_original({name: probe})
    if len(renamed) != 1:
      continue  # tied to another tensor: dropped by the renaming
    ((target, value_probe),) = renamed.items()
    if target not in original:
      continue  # a buffer of the PyTorch model (position ids)
    value = np.asarray(original[target], np.float32)
    weights[name] = np.ascontiguousarray(value if np.array_equal(value_probe, probe) else value.T)
  return weights
