"""The command-line tools: installed commands, the original scripts, and the environment."""

import ast
import json
import os
import subprocess
import sys
import tomllib

import pytest

from official_bert import cli
from official_bert.common import cpuinfo

from testing import REPOSITORY


def _scripts():
  with open(REPOSITORY / "pyproject.toml", "rb") as f:
    return tomllib.load(f)["project"]["scripts"]


def _functions(path):
  return {node.name for node in ast.parse(path.read_text()).body
          if isinstance(node, ast.FunctionDef)}


def test_every_command_names_a_tool_with_a_run_function_and_its_original_script():
  scripts = _scripts()
  assert len(scripts) == 12
  for command, target in scripts.items():
    module, function = target.split(":")
    assert module.startswith("official_bert.cli.") and function == "run", command
    name = module.rsplit(".", 1)[1]
    assert command == "bert-" + name.replace("_", "-")
    assert "run" in _functions(REPOSITORY / "official_bert" / "cli" / f"{name}.py"), command
    if name != "convert_checkpoint":  # a tool of this package, not of the original
      shim = (REPOSITORY / f"{name}.py").read_text()
      assert f"from official_bert.cli import {name}" in shim and f"{name}.run()" in shim


def _imported(code, **env):
  environment = {k: v for k, v in os.environ.items()
                 if k not in ("TF_ENABLE_ONEDNN_OPTS", "XLA_FLAGS")}
  environment.update(env)
  result = subprocess.run([sys.executable, "-c", code], cwd=REPOSITORY, env=environment,
                          capture_output=True, text=True, check=True)
  return result.stdout.split()


def test_the_library_leaves_the_environment_alone_and_the_tools_turn_onednn_on():
  report = ("import os, sys; print('tensorflow' in sys.modules, "
            "os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset'))")
  assert _imported("import official_bert; " + report) == ["False", "unset"]
  assert _imported("import official_bert.cli; " + report) == ["False", "1"]
  assert _imported("import official_bert.cli; " + report, TF_ENABLE_ONEDNN_OPTS="0") == [
      "False", "0"]


def test_the_tools_give_xla_512_bit_vectors_on_avx512_and_keep_the_users_own_width(helps):
  assert cli.xla_flags("", {"avx512f", "amx_bf16"}) == "--xla_cpu_prefer_vector_width=512"
  assert cli.xla_flags("--xla_dump_to=/tmp/d", {"avx512f"}) == (
      "--xla_dump_to=/tmp/d --xla_cpu_prefer_vector_width=512")
  assert cli.xla_flags("", {"avx2", "fma"}) == ""
  assert cli.xla_flags("--xla_cpu_prefer_vector_width=256", {"avx512f"}) == (
      "--xla_cpu_prefer_vector_width=256")
  report = "import os; print(os.environ.get('XLA_FLAGS', 'unset'))"
  assert _imported("import official_bert; " + report) == ["unset"]
  expected = "--xla_cpu_prefer_vector_width=512" if "avx512f" in cpuinfo.flags() else "unset"
  assert _imported("import official_bert.cli; " + report) == [expected]
  # XLA aborts the process on a flag it does not know: this TensorFlow's XLA takes it (the
  # `helps` process, which has TensorFlow and the tools imported, compiles with the flag set).
  assert helps["xla"] == ["--xla_cpu_prefer_vector_width=512", 3.0]


_HELP_FLAGS = {
    "build_vocab": ["--input_file", "--vocab_size", "--[no]verbose"],
    "shuffle_records": ["--input_file", "--bucket_size_mb", "--random_seed"],
    "run_classifier": ["--task_name", "--init_checkpoint", "--dtype", "--learning_rate"]}

# One process: first the tools are imported (TensorFlow defines flags of its own when imported;
# a tool defines its own only in `define_flags`), then each tool's `run()` on `--help`, one after
# another (as `testing.run_tools` runs tools, keeping what the help prints on stdout); last, under
# the user's own `XLA_FLAGS` vector width, the flags left after importing the tools and an XLA
# compilation.
_HELP = """
import contextlib, importlib, io, json, os, sys
from absl import app, flags
import tensorflow
app.define_help_flags()
before = set(flags.FLAGS)
tools = [importlib.import_module(t.split(":")[0]) for t in json.loads(sys.argv[1])]
done = {"new flags on import": len(set(flags.FLAGS) - before)}
importlib.import_module("official_bert.cli.run_squad").define_flags()
done["run_squad"] = [flags.FLAGS["max_seq_length"].default, "doc_stride" in flags.FLAGS]
for name in set(flags.FLAGS) - before:
  delattr(flags.FLAGS, name)
for tool in sys.argv[2:]:
  sys.argv, stdout = [tool + ".py", "--help"], io.StringIO()
  try:
    with contextlib.redirect_stdout(stdout):
      importlib.import_module("official_bert.cli." + tool).run()
    status = 0
  except SystemExit as end:
    status = end.code if isinstance(end.code, int) else int(end.code is not None)
  for name in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, name)
  flags.FLAGS.unparse_flags()
  done[tool] = [status, stdout.getvalue()]
done["xla"] = [os.environ.get("XLA_FLAGS", "unset"), float(tensorflow.function(
    lambda x: x * 2.0, jit_compile=True)(tensorflow.constant(1.5)))]
print(json.dumps(done))
"""


@pytest.fixture(scope="module")
def helps():
  tools = json.dumps(sorted(_scripts().values()))
  result = subprocess.run([sys.executable, "-c", _HELP, tools, *_HELP_FLAGS], cwd=REPOSITORY,
                          capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                   XLA_FLAGS="--xla_cpu_prefer_vector_width=512"))
  assert result.returncode == 0, result.stderr[-2000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_tools_defines_no_flag_and_define_flags_defines_each_tools_own(helps):
  assert helps["new flags on import"] == 0
  assert helps["run_squad"] == [384, True]


@pytest.mark.parametrize("tool", _HELP_FLAGS)
def test_help_lists_the_tools_own_flags_and_exits_0(helps, tool):
  status, stdout = helps[tool]
  assert status == 0, stdout[-2000:]
  # The tool's own flags come first, then those it shares with other tools.
  assert (stdout.index(f"official_bert.cli.{tool}:")
          < stdout.index("official_bert.cli.launch:"))
  for flag in _HELP_FLAGS[tool]:
    assert f"  {flag}:" in stdout, flag
