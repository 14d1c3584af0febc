"""The reliability promise for paths: no run destroys what it reads, and none fails after the work.

Each test runs the real tools (a subprocess for the exit status, several tools in one subprocess
through `testing.run_tools` where each would only refuse, the driver in this process where that is
cheap) on tiny files and checks that the user's data survives byte for byte:

  1. an output that is, holds or lies inside an input (`--export_dir` naming `--output_dir` or a
     parent of `--data_dir`, `--output_dir` naming the pre-trained model, `--output_file` naming
     the corpus, a glob of inputs matching the output) is refused before any work, with one line
     naming both flags, for every tool; `file://` URLs, `..` and symbolic links name the same
     place as the plain path;
  2. `--overwrite_output_dir` deletes only what the package wrote, never the user's other files
     or the run's inputs;
  3. an export replaces only an earlier export of ours: a folder holding anything else is refused
     before training, even with `--overwrite`; `export_saved_model.py` into an existing export
     is one line (exit 2), and a killed export's temporaries are removed by the next export;
  4. an output folder that is a file, read-only, or on a file system that cannot be reached, and
     an input out of reach, are found before the first step;
  5. a `run_fingerprint.json` of the wrong JSON type and an empty `run.lock` are one-line errors.
"""

import json
import logging
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from official_bert import BertClassifier
from official_bert.checkpoints import save_model_dir
from official_bert.common import paths
from official_bert.common.errors import UserError
from official_bert.data import synthetic
from official_bert.export import archive, export_model_dir
from official_bert.tasks import classification, output_folder
from official_bert.tasks.experiment import ExperimentConfig

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  engine_configs,
  file_uri,
  run_python,
  run_task,
  run_tools,
  tiny_bert_config,
  write_vocab,
)

ENGINE = dict(enable_xla=False, seed=0, steps_per_loop=10, log_steps=10)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """A user's folder: a model (vocabulary, config, fine-tuned folder), GLUE data and a corpus."""
  root = tmp_path_factory.mktemp("user")
  sst2 = root / "glue" / "SST-2"
  synthetic.write_sentiment_task(str(sst2), num_train=48, num_dev=16, seed=3)
  rows = [line.split("\t") for line in (sst2 / "train.tsv").read_text().splitlines()[1:]]
  words = sorted({word for sentence, _ in rows for word in sentence.split()})
  model = root / "model"
  model.mkdir()
  write_vocab(model / "vocab.txt", SPECIAL_TOKENS + words)
  # One layer: no check here depends on depth, and each layer adds to the tracing time.
  config = tiny_bert_config(len(SPECIAL_TOKENS) + len(words), hidden_size=32, num_hidden_layers=1,
                            max_position_embeddings=32)
  config.to_json_file(model / "bert_config.json")
  classifier = BertClassifier(config, num_classes=2)
  classifier(classifier.input)
  save_model_dir(classifier, root / "finetuned", vocab_file=str(model / "vocab.txt"),
                 do_lower_case=True, max_seq_length=16, labels=["0", "1"])
  corpus = root / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("".join(f"{sentence}\n" + ("\n" if i % 4 == 3 else "")
                                        for i, (sentence, _) in enumerate(rows)))
  records = root / "records"
  records.mkdir()
  (records / "train.tfrecord").write_bytes(b"")
  return {"root": root, "sst2": sst2, "vocab": str(model / "vocab.txt"),
          "config": str(model / "bert_config.json"), "model": model,
          "finetuned": root / "finetuned", "corpus": corpus, "records": records}


def _snapshot(folder):
  """Every file under `folder` with its bytes: what must survive a refused run."""
  return {os.path.relpath(os.path.join(top, name), folder):
          pathlib.Path(top, name).read_bytes()
          for top, _, names in os.walk(folder) for name in names}


def _tool(script, *args):
  """Runs a tool: a script of the repository, or a module (`official_bert.cli.<tool>`)."""
  command = (["-m", script] if script.startswith("official_bert.")
             else [str(REPOSITORY / script)])
  return run_python([sys.executable, *command, *map(str, args)], timeout=300)


def _refused(result):
  """The one line of a refused run (exit status 2, no traceback): `result` is a finished process
  or a `run_tools` result, `(exit status, stderr)`."""
  status, stderr = ((result.returncode, result.stderr) if hasattr(result, "returncode")
                    else result)
  assert status == 2, stderr[-3000:]
  assert "Traceback" not in stderr
  return stderr.strip().splitlines()[-1]


def _fine_tuning(files, script="run_classifier.py"):
  return [script, f"--vocab_file={files['vocab']}", f"--bert_config_file={files['config']}",
          "--max_seq_length=16", "--train_batch_size=16", "--enable_xla=false", "--do_train"]


def _classifier(files, *args):
  return _fine_tuning(files) + ["--task_name=SST-2", f"--data_dir={files['sst2']}", *args]


def _read_only_folder(tmp_path):
  """A folder this process cannot write: root writes anywhere but in sysfs."""
  if os.geteuid() == 0:
    return "/sys"
  folder = tmp_path / "read_only"
  folder.mkdir()
  folder.chmod(0o555)
  return str(folder)


# === 1. An output that is also an input ===


def test_paths_that_name_one_place_compare_equal(tmp_path):
  (tmp_path / "data").mkdir()
  os.symlink(tmp_path / "data", tmp_path / "link")
  same = [str(tmp_path / "data"), f"{tmp_path}/data/", file_uri(tmp_path / "data"),
          f"file://{tmp_path}/x/../data/", str(tmp_path / "link")]
  assert {paths.normalize(path) for path in same} == {str((tmp_path / "data").resolve())}
  assert paths.normalize("gs://bucket/a/./b/../c/") == "gs://bucket/a/c"
  assert paths.normalize("gs://bucket/a") != paths.normalize("gs://bucket/ab")


def test_an_output_that_is_holds_or_lies_inside_an_input_is_refused_naming_both_flags(files):
  root, sst2 = files["root"], files["sst2"]
  refused = [
      ({"data_dir": sst2}, {"export_dir": file_uri(root / "glue")}, "contains"),
      ({"init_checkpoint": files["finetuned"]}, {"output_dir": f"{files['finetuned']}/"}, "is"),
      ({"init_checkpoint": files["model"] / "bert_model.ckpt"},
       {"output_dir": file_uri(files["model"])}, "contains"),
      ({"data_dir": sst2}, {"output_dir": sst2 / "out"}, "lies inside"),
      ({"input_file": f"{files['corpus']}/*.txt"},
       {"output_file": file_uri(files["corpus"] / "out.txt")}, "is matched by"),
      ({"input_file": f"x.txt,{files['corpus']}/a.txt"},
       {"output_file": f"{root}/corpus/../corpus/a.txt"}, "is"),
  ]
  for inputs, outputs, relation in refused:
    (input_flag, _), (output_flag, output_path) = (*inputs.items(), *outputs.items())
    with pytest.raises(paths.PathConflictError) as error:
      paths.check_run_paths(inputs, outputs)
    assert str(error.value).startswith(f"--{output_flag}={output_path} {relation} "
                                       f"--{input_flag}=")
    assert "\n" not in str(error.value)
  # Outputs apart from each other: an export replaces its folder whole.
  with pytest.raises(paths.PathConflictError, match=r"--output_dir=\S+ is --export_dir=.*"
                     "Choose another --export_dir"):
    paths.check_run_paths({}, {"output_dir": root / "out", "export_dir": file_uri(root / "out")})
  with pytest.raises(paths.PathConflictError, match="--export_dir=.* contains --output_dir="):
    paths.check_run_paths({}, {"output_dir": root / "out", "export_dir": root})
  # Apart, or an export inside the output folder: accepted, and nothing is written.
  before = _snapshot(root)
  paths.check_run_paths({"data_dir": sst2, "vocab_file": files["vocab"]},
                        {"output_dir": root / "out", "export_dir": root / "out" / "export"})
  paths.check_run_paths({"input_file": f"{files['corpus']}/*.txt"},
                        {"output_file": root / "corpus_records" / "a.txt"})
  assert _snapshot(root) == before and not (root / "out").exists()


# For every tool, an output naming the place of an input: its command line, and the refusal.
_REFUSALS = {
    "classifier-export_is_output": (
        lambda f: _classifier(f, f"--output_dir={f['root']}/out", f"--export_dir={f['root']}/out"),
        r"--output_dir=\S+/out is --export_dir=\S+/out: .*Choose another --export_dir\."),
    "pretraining_data-output_is_input": (
        lambda f: ["create_pretraining_data.py", f"--input_file={f['corpus']}/a.txt",
                   f"--output_file={f['corpus']}/a.txt", f"--vocab_file={f['vocab']}"],
        r"--output_file=\S+/a.txt is --input_file=\S+/a.txt: the run would overwrite"),
    "classifier-export_holds_data": (
        lambda f: _classifier(f, f"--output_dir={f['root']}/out",
                              f"--export_dir={file_uri(f['root'] / 'glue')}"),
        r"--export_dir=file://\S+/glue contains --data_dir="),
    "classifier-output_is_init": (
        lambda f: _classifier(f, f"--output_dir={file_uri(f['finetuned'])}",
                              f"--init_checkpoint={f['finetuned']}"),
        r"--output_dir=file://\S+ is --init_checkpoint="),
    "classifier-overwrite_output_holds_vocab": (
        lambda f: _fine_tuning(dict(f, vocab=f"{f['finetuned']}/vocab.txt")) + [
            "--task_name=SST-2", f"--data_dir={f['sst2']}", f"--output_dir={f['finetuned']}",
            "--overwrite_output_dir"],
        r"--output_dir=\S+ contains --vocab_file=\S+/finetuned/vocab.txt"),
    "squad-output_holds_model": (
        lambda f: _fine_tuning(f, "run_squad.py") + [
            f"--train_file={f['sst2']}/train.tsv", f"--output_dir={f['model']}",
            f"--init_checkpoint={f['model']}/bert_model.ckpt"],
        r"--output_dir=\S+/model contains --bert_config_file="),
    "ner-output_in_data": (
        lambda f: _fine_tuning(f, "run_ner.py") + [
            f"--data_dir={f['sst2']}", f"--output_dir={f['sst2']}/../SST-2/out"],
        r"--output_dir=\S+ lies inside --data_dir="),
    "swag-export_in_data": (
        lambda f: _fine_tuning(f, "run_swag.py") + [
            f"--data_dir={f['root']}/glue", f"--output_dir={f['root']}/out",
            f"--export_dir={f['root']}/glue/export"],
        r"--export_dir=\S+ lies inside --data_dir="),
    "pretraining-output_holds_records": (
        lambda f: ["run_pretraining.py", f"--bert_config_file={f['config']}",
                   f"--input_file={file_uri(f['records'])}/*.tfrecord",
                   f"--output_dir={f['records']}", "--do_train"],
        r"--output_dir=\S+ contains --input_file=file://"),
    "extract_features-output_is_input": (
        lambda f: ["extract_features.py", f"--input_file={file_uri(f['corpus'])}/a.txt",
                   f"--output_file={f['corpus']}/a.txt", f"--init_checkpoint={f['finetuned']}"],
        r"--output_file=\S+ is --input_file=file://"),
    "build_vocab-output_is_input": (
        lambda f: ["build_vocab.py", f"--input_file={f['corpus']}/*.txt",
                   f"--output_file={f['corpus']}/a.txt"],
        r"--output_file=\S+ is --input_file="),
    "convert_checkpoint-output_holds_input": (
        lambda f: ["official_bert.cli.convert_checkpoint", "--input_format=keras",
                   f"--input={f['finetuned']}", f"--output_dir={f['root']}"],
        r"--output_dir=\S+ contains --input="),
    "export_saved_model-export_in_model": (
        lambda f: ["export_saved_model.py", f"--model_dir={f['finetuned']}",
                   f"--export_dir={f['finetuned']}/export"],
        r"--export_dir=\S+ lies inside --model_dir="),
    "build_vocab-input_missing": (
        lambda f: ["build_vocab.py", f"--input_file={file_uri(f['root'] / 'missing.txt')}",
                   f"--output_file={file_uri(f['root'] / 'vocab_out.txt')}"],
        r"missing.txt': no such file"),
    # A folder or a file system no tool can use: named in one line before training.
    "classifier-export_unwritable": (
        lambda f: _classifier(f, f"--output_dir={f['root']}/out",
                              f"--export_dir={f['read_only']}/export"),
        r"^error: --export_dir=\S+/export cannot be written: \S+ is read-only for this user\. "
        r"Choose another --export_dir\.$"),
    "classifier-output_out_of_reach": (
        lambda f: _classifier(f, "--output_dir=nosuch://bucket/out"),
        r"^error: --output_dir=nosuch://bucket/out cannot be reached: File system scheme "
        r"'nosuch' not implemented"),
    "classifier-data_out_of_reach": (
        lambda f: [*_fine_tuning(f), "--task_name=SST-2", "--data_dir=nosuch://bucket/glue",
                   f"--output_dir={f['root']}/out"],
        r"^error: --data_dir=nosuch://bucket/glue cannot be reached"),
    "classifier-output_is_a_file": (
        lambda f: _classifier(f, f"--output_dir={f['root']}/a_file"),
        r"^error: --output_dir=\S+/a_file is an existing file; it names a folder to write\. "
        r"Choose another --output_dir\.$"),
}


@pytest.fixture(scope="module")
def refusals(files, tmp_path_factory):
  """Every case of `_REFUSALS` run by its tool, all in one process (`run_tools`: one
  TensorFlow import, not eighteen), with the user's folder before and after."""
  # A folder this process cannot write and a file where a folder is asked (it must keep "keep").
  files = dict(files, read_only=_read_only_folder(files["root"]))
  (files["root"] / "a_file").write_text("keep")
  before = _snapshot(files["root"])
  results = run_tools([command(files) for command, _ in _REFUSALS.values()],
                      tmp_path_factory.mktemp("tools"))
  return dict(zip(_REFUSALS, results)), before, _snapshot(files["root"])


@pytest.mark.parametrize("case", _REFUSALS)
def test_every_tool_refuses_an_output_that_is_an_input_before_any_work(files, refusals, case):
  results, before, after = refusals
  line = _refused(results[case])
  assert line.startswith("error: ") and re.search(_REFUSALS[case][1], line), line
  assert after == before  # nothing read was touched, nothing was written
  assert not (files["root"] / "out").exists()


# === 2. overwrite_output_dir deletes only what the package wrote ===


def _classify(files, output_dir, **config):
  return run_task(classification.ClassificationTask,
                  config=ExperimentConfig(
                      output_dir=str(output_dir), **config,
                      **engine_configs(train_batch_size=16, learning_rate=1e-3,
                                       num_train_epochs=1.0, **ENGINE)),
                  bert_config_file=files["config"], vocab_file=files["vocab"], task_name="SST-2",
                  data_dir=str(files["sst2"]), max_seq_length=16, do_train=True)


@pytest.mark.slow  # three runs of the driver, two of them training runs
def test_overwrite_output_dir_deletes_only_what_the_package_wrote(files, tmp_path):
  output_dir = tmp_path / "out"
  _classify(files, output_dir)
  (output_dir / "notes.txt").write_text("the user's own notes")
  (output_dir / "old_ckpt_copy").mkdir()
  first = tf.train.latest_checkpoint(str(output_dir))
  (output_dir / "eval_results.txt").write_text("eval_accuracy = 0.1\n")  # an earlier run's
  (output_dir / "ckpt-99.index").write_bytes(b"")

  _classify(files, output_dir, overwrite_output_dir=True)
  assert (output_dir / "notes.txt").read_text() == "the user's own notes"
  assert (output_dir / "old_ckpt_copy").is_dir()
  assert not (output_dir / "eval_results.txt").exists()
  assert not (output_dir / "ckpt-99.index").exists()
  assert tf.train.latest_checkpoint(str(output_dir)) == first  # trained afresh to the same step
  assert (output_dir / "model.weights.h5").exists()

  # A vocabulary read from the folder is never deleted: the run is refused first.
  vocab = output_dir / "vocab.txt"
  with pytest.raises(UserError, match="holds this run's input"):
    _classify(dict(files, vocab=file_uri(vocab)), output_dir, overwrite_output_dir=True)
  assert vocab.read_text() == open(files["vocab"]).read()


# === 3. An export replaces only an export of ours ===


def test_a_foreign_or_unwritable_export_dir_stops_the_run_before_training(files, tmp_path):
  foreign = tmp_path / "served"
  foreign.mkdir()
  (foreign / "saved_model.pb").write_bytes(b"another tool's model")
  for export_dir in (foreign, file_uri(foreign)):
    with pytest.raises(archive.ExportDirError, match="holds files that are no export"):
      _classify(files, tmp_path / "out", export_dir=str(export_dir))
  assert (foreign / "saved_model.pb").read_bytes() == b"another tool's model"
  with pytest.raises(paths.UnusablePathError, match="--export_dir=.* cannot be written: .* is "
                     "read-only"):
    _classify(files, tmp_path / "out", export_dir=f"{_read_only_folder(tmp_path)}/export")
  with pytest.raises(paths.PathConflictError, match="--output_dir=.* is --export_dir="):
    _classify(files, tmp_path / "out", export_dir=f"{tmp_path}/out/")
  assert not tf.io.gfile.glob(f"{tmp_path}/out/ckpt-*")  # no step was taken


def _dead_pid():
  process = subprocess.Popen([sys.executable, "-c", "pass"])
  process.wait()
  return process.pid


def test_an_export_replaces_only_our_exports_and_clears_a_killed_exports_debris(files, tmp_path,
                                                                                caplog):
  export_dir = tmp_path / "serving" / "1"
  export_dir.parent.mkdir()
  dead = tmp_path / "serving" / f"1.tmp-{socket.gethostname()}-{_dead_pid()}-0123abcd"
  elsewhere = tmp_path / "serving" / "1.tmp-another-host-7-0123abcd"
  for debris in (dead, elsewhere):
    (debris / "variables").mkdir(parents=True)
  with caplog.at_level(logging.WARNING):
    export_model_dir(str(files["finetuned"]), str(export_dir), jit_compile=False, buckets=())
  assert not dead.exists() and elsewhere.exists()
  assert f"Removing {dead}, left by an interrupted run" in caplog.text
  mark = json.loads((export_dir / archive.EXPORT_MARK).read_text())
  assert set(mark["entries"]) | {archive.EXPORT_MARK} == set(os.listdir(export_dir))
  archive.check_export_dir(export_dir, overwrite=True)  # ours: replaced on request

  (export_dir / "notes.txt").write_text("added by the user")  # no longer only our export
  with pytest.raises(archive.ExportDirError, match=r"holds files that are no export .*notes.txt"):
    archive.check_export_dir(export_dir, overwrite=True)


@pytest.mark.slow
def test_the_export_after_a_killed_one_clears_its_debris_and_a_second_is_one_line(files, tmp_path,
                                                                                caplog):
  export_dir = tmp_path / "serving" / "1"
  killed = subprocess.Popen(
      [sys.executable, str(REPOSITORY / "export_saved_model.py"),
       f"--model_dir={files['finetuned']}", f"--export_dir={export_dir}", "--nojit_compile",
       "--buckets=none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  pattern = f"{export_dir}.tmp-{socket.gethostname()}-{killed.pid}-*"
  deadline = time.time() + 240
  while not tf.io.gfile.glob(pattern) and killed.poll() is None and time.time() < deadline:
    time.sleep(0.02)
  killed.kill()
  killed.wait()
  left = tf.io.gfile.glob(pattern)
  assert left and not export_dir.exists(), "the export was not caught while writing"
  with caplog.at_level(logging.WARNING):
    export_model_dir(str(files["finetuned"]), str(export_dir), jit_compile=False, buckets=())
  assert os.listdir(export_dir.parent) == ["1"]
  assert f"Removing {left[0]}, left by an interrupted run (process {killed.pid}" in caplog.text

  # `export_saved_model.py` into that export, or into a folder of the user's, is one line.
  foreign = tmp_path / "foreign"
  foreign.mkdir()
  (foreign / "data.csv").write_text("keep")
  taken, held = run_tools([  # one process for both
      ["export_saved_model.py", f"--model_dir={files['finetuned']}", f"--export_dir={export_dir}"],
      ["export_saved_model.py", f"--model_dir={files['finetuned']}",
       f"--export_dir={file_uri(foreign)}", "--overwrite"]], tmp_path)
  assert _refused(taken) == (f"error: export_dir {export_dir} holds an earlier export; pass "
                             "overwrite=True (--overwrite) to replace it, or choose another "
                             "export_dir.")
  assert "holds files that are no export of this package (data.csv)" in _refused(held)
  assert os.listdir(foreign) == ["data.csv"]


# === 4. Outputs checked writable, inputs reachable, before the first step ===


def test_an_output_that_cannot_be_written_is_named_before_any_work(tmp_path, monkeypatch):
  a_file = tmp_path / "results.txt"
  a_file.write_text("keep")
  cases = [
      ("output_dir", str(a_file), "is an existing file; it names a folder"),
      ("output_dir", file_uri(a_file) + "/run", "lies under .*results.txt, which is a file"),
      ("output_file", str(tmp_path), "is a folder; it names a file"),
      ("export_dir", f"{_read_only_folder(tmp_path)}/new/export", "cannot be written: .* is "
       "read-only for this user"),
      ("output_dir", "nosuch://bucket/out", "cannot be reached: File system scheme 'nosuch' not "
       "implemented"),
  ]
  for name, path, message in cases:
    with pytest.raises(paths.UnusablePathError, match=f"^--{name}={re.escape(path)} {message}"):
      paths.check_run_paths({}, {name: path})
  assert a_file.read_text() == "keep" and os.listdir(tmp_path) == ["results.txt"]
  paths.check_run_paths({}, {"output_dir": tmp_path / "new" / "deeper",
                             "output_file": file_uri(tmp_path / "x.jsonl")})
  assert os.listdir(tmp_path) == ["results.txt"]  # the probe leaves nothing behind

  # A gs:// bucket out of reach: the real tf.io.gfile call runs, and fails as GCS does offline.
  real_exists = tf.io.gfile.exists

  def offline(path):
    if str(path).startswith("gs://"):
      raise tf.errors.FailedPreconditionError(
          None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve "
          "hostname'\n\t when reading metadata of " + str(path))
    return real_exists(path)

  monkeypatch.setattr(tf.io.gfile, "exists", offline)
  for flags in ({"output_dir": "gs://bucket/out"}, {"vocab_file": "gs://bucket/vocab.txt"}):
    with pytest.raises(paths.UnusablePathError,
                       match=f"^--{next(iter(flags))}=gs://bucket/.* cannot be reached: Error "
                       "executing an HTTP request: libcurl code 6 .*'Could not resolve hostname'"
                       r"\. Check the path, the network"):
      paths.check_run_paths(*((flags, {}) if "vocab" in next(iter(flags)) else ({}, flags)))


# === 5. Damaged state files in the output folder ===


@pytest.mark.parametrize("content", ["[1, 2]\n", '"model"\n', '{"model": 3, "training": {}}\n'])
def test_a_fingerprint_of_the_wrong_json_type_is_one_line(files, tmp_path, content):
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  (output_dir / output_folder.FINGERPRINT_NAME).write_text(content)
  with pytest.raises(UserError, match=r"run_fingerprint.json is damaged \(not a JSON object with "
                     r"\"model\" and \"training\" objects, .*\): delete it") as error:
    _classify(files, output_dir)
  assert "\n" not in str(error.value) and not tf.io.gfile.glob(f"{output_dir}/ckpt-*")


def test_an_empty_or_damaged_lock_names_no_process_none(tmp_path):
  lock_file = tmp_path / output_folder.LOCK_NAME
  for content in ("", "[]", "{not json"):
    lock_file.write_text(content)
    with pytest.raises(output_folder.OutputDirInUseError) as error:
      output_folder.OutputDirLock(tmp_path).acquire()
    message = str(error.value)
    assert "None" not in message and "run.lock is empty or damaged" in message
    assert f"if that run is gone, delete {lock_file}" in message
  assert lock_file.read_text() == "{not json"  # never taken over: its holder is unknown


def test_a_run_on_a_folder_with_an_empty_lock_stops_naming_the_file(files, tmp_path):
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  (output_dir / output_folder.LOCK_NAME).write_text("")
  with pytest.raises(output_folder.OutputDirInUseError,
                     match=r"in use by another run \(its run.lock is empty or damaged, so the "
                     r"holder is unknown\).* delete \S+run.lock\.$"):
    _classify(files, output_dir)
  assert os.listdir(output_dir) == [output_folder.LOCK_NAME]
