"""The documentation's Python blocks run as written, so the docs cannot drift from the code.

Every ```python block of README.md, CONTRIBUTING.md and docs/ (its design notes included) runs on
its own, in a fresh temporary folder, its working directory. The folder holds what a user of a
released checkpoint has at hand, in miniature: `vocab.txt`, `bert_config.json` (a 1-layer model:
what the blocks show does not depend on the depth, and each layer adds to every block's tracing),
`bert_model.ckpt` (its original TF1 checkpoint, MLM and NSP heads included) and `sample_text.txt`
(a pre-training corpus).
A `print(...)` whose last line ends in a comment promises that output: the comment is compared
with the line it prints, as a doctest would (`...` matches anything). Shell, JSON and listing
blocks are not run.

A block that names the Keras backend it is for (`os.environ.setdefault("KERAS_BACKEND", "jax")`)
runs in this process on TensorFlow, whose Keras is already loaded, and again, as its reader runs
it, in a new interpreter on the backend it names.
"""

import ast
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize

import pytest

from testing import REPOSITORY, SPECIAL_TOKENS, tiny_bert_config, write_vocab

PAGES = [REPOSITORY / "README.md", REPOSITORY / "CONTRIBUTING.md",
         *sorted((REPOSITORY / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
# Blocks that train or export run end to end: a few seconds to half a minute each. The exports to
# LiteRT, ONNX and OpenVINO (`export_model_dir_as`) have their own fast tests in tests/export.
_SLOW_CALLS = ("driver.run(", "export_model_dir(", "export_model_dir_as(")
_BACKEND = re.compile(r"""os\.environ\.setdefault\(["']KERAS_BACKEND["'], ["'](\w+)["']\)""")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")

_WORDS = """the a an of and to is was it film movie good bad great moving gripping two hours i will
not get back cat sat on mat sitting who what where when did wrote write play plays book books
shakespeare hamlet river flows through city paris london story stories read reads""".split()
_SAMPLE_TEXT = """The cat sat on the mat.
It was a good film.
The river flows through the city.

Who wrote the play?
Shakespeare wrote Hamlet.
It is a great story.

I read two books.
The books were not bad.
"""


def python_blocks():
  """`(page, line, source)` of every ```python block of the pages, in order."""
  blocks = []
  for page in PAGES:
    if not page.exists():
      continue
    text = page.read_text()
    for match in _FENCE.finditer(text):
      if match.group(1) == "python":
        line = text.count("\n", 0, match.start()) + 2
        blocks.append((page, line, match.group(2)))
  return blocks


BLOCKS = python_blocks()


def promised_outputs(source):
  """For each top-level `print(...)` of a block, in order: the output its trailing comment
  promises, or None when its last line has no comment."""
  comments = {token.start[0]: token.string[1:].strip()
              for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type == tokenize.COMMENT}
  return [comments.get(node.end_lineno) for node in ast.parse(source).body
          if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
          and getattr(node.value.func, "id", None) == "print"]


def test_promised_outputs_are_read_from_the_comments():
  source = 'print(1)  # 1\nx = 2  # not a print\nprint(x,\n      x)  # 2 2\nprint(3)\n'
  assert promised_outputs(source) == ["1", "2 2", None]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  """A folder with a tiny released checkpoint's files and a pre-training corpus."""
  from official_bert import BertPretrainer
  from official_bert.checkpoints import save_tf1_checkpoint

  folder = tmp_path_factory.mktemp("doc_inputs")
  tokens = [*SPECIAL_TOKENS, ".", ",", "?", "!", *_WORDS,
            *(f"##{suffix}" for suffix in ("s", "ed", "ing", "ly"))]
  write_vocab(folder / "vocab.txt", tokens)
  config = tiny_bert_config(len(tokens), num_hidden_layers=1, max_position_embeddings=64)
  config.to_json_file(str(folder / "bert_config.json"))
  save_tf1_checkpoint(BertPretrainer(config), str(folder / "bert_model.ckpt"))
  (folder / "sample_text.txt").write_text(_SAMPLE_TEXT)
  return folder


def test_the_pages_have_python_blocks():
  pages = {page.name for page, _, _ in BLOCKS}
  assert "README.md" in pages, "the README's quick start should be a runnable python block"
  assert len(BLOCKS) >= 4, [f"{page.name}:{line}" for page, line, _ in BLOCKS]


def test_readme_keeps_the_two_commands():
  # .ci/run calls `python3 dev.py test`, the README's test command; a fresh clone starts here.
  readme = (REPOSITORY / "README.md").read_text()
  assert "python3 dev.py demo" in readme
  assert "python3 dev.py test" in readme
  assert "python3 dev.py test" in (REPOSITORY / ".ci" / "run").read_text()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPOSITORY).as_posix())
def test_relative_links_resolve(page):
  if not page.exists():
    pytest.fail(f"{page} is missing")
  targets = [target for target in _LINK.findall(page.read_text())
             if "://" not in target and not target.startswith("mailto:")]
  missing = [target for target in targets if not (page.parent / target).exists()]
  assert not missing, f"{page.name} links to files that do not exist: {missing}"


@pytest.mark.parametrize("page, line, source", [
    pytest.param(page, line, source, id=f"{page.relative_to(REPOSITORY).as_posix()}:{line}",
                 marks=[pytest.mark.slow] if any(call in source for call in _SLOW_CALLS) else [])
    for page, line, source in BLOCKS])
def test_python_block_runs(page, line, source, inputs, tmp_path, monkeypatch, capsys):
  shutil.copytree(inputs, tmp_path, dirs_exist_ok=True)
  monkeypatch.chdir(tmp_path)
  code = compile(source, f"{page.relative_to(REPOSITORY)}:{line}", "exec")
  # A block may set variables for the process it shows (docs/backends.md sets KERAS_BACKEND):
  # they must not reach the scripts that later tests of this worker start.
  environment = dict(os.environ)
  try:
    exec(code, {"__name__": f"docs_block_{line}"})  # noqa: S102  (the block is the test)
  finally:
    os.environ.clear()
    os.environ.update(environment)
  _check_printed(source, capsys.readouterr().out.splitlines())


def _check_printed(source, printed):
  promised = promised_outputs(source)
  assert len(printed) == len(promised), (
      f"each print of the block should print one line; it printed {printed}")
  checker = doctest.OutputChecker()
  for want, got in zip(promised, printed):
    if want is not None:
      assert checker.check_output(want + "\n", got + "\n", doctest.ELLIPSIS), (
          f"the block promises {want!r} but printed {got!r}")


_BACKEND_BLOCKS = [(page, line, source, _BACKEND.search(source).group(1))
                   for page, line, source in BLOCKS if _BACKEND.search(source)]


def test_the_worked_backend_example_is_found():
  assert ("backends.md", "jax") in {(page.name, backend) for page, _, _, backend in _BACKEND_BLOCKS}


@pytest.mark.slow
@pytest.mark.parametrize("page, line, source, backend", [
    pytest.param(*block, id=f"{block[0].relative_to(REPOSITORY).as_posix()}:{block[1]}")
    for block in _BACKEND_BLOCKS])
def test_a_block_for_another_backend_runs_on_it(page, line, source, backend, inputs, tmp_path):
  shutil.copytree(inputs, tmp_path, dirs_exist_ok=True)
  (tmp_path / "block.py").write_text(
      source + "\nimport keras as _keras\nprint('backend', _keras.backend.backend())\n")
  env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
  env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")]))
  done = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=600, check=False)
  assert done.returncode == 0, f"{page.name}:{line}\n{done.stderr[-3000:]}"
  printed = done.stdout.splitlines()
  assert printed[-1] == f"backend {backend}", printed
  _check_printed(source, printed[:-1])
