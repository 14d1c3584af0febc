"""The LiteRT tokens benchmark end to end on a small GLUE-shaped folder and a tiny encoder with
BERT's uncased vocabulary (MiniLM's): the LiteRT file packs the ids of both references on
sentences with the characters tf.text's own normalizer would change, and its outputs and the ONNX
file's stay within 1e-4 of the SavedModel's."""

import os
import pathlib
import re
import sys

import pytest

from official_bert import BertEncoder
from official_bert.checkpoints import tf1

from testing import minilm_model_dir, run_python, tiny_bert_config

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "litert_tokens.py"
SENTENCES = ["The µGuru's ﬁne co\u00adoperation…", "Ａ full-width letter, and Straße.",
             "İstanbul and Café", "a plain sentence"]


def _glue_folder(root):
  """The four dev files the script reads, in their own column layouts."""
  rows = {"SST-2": (["sentence", "label"], [[s, "1"] for s in SENTENCES]),
          "CoLA": (None, [["src", "1", "", s] for s in SENTENCES]),
          "MRPC": (["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                   [["1", "1", "2", s, s.upper()] for s in SENTENCES]),
          "STS-B": (["index", "genre", "filename", "year", "old_index", "source1", "source2",
                     "sentence1", "sentence2", "score"],
                    [["0", "g", "f", "y", "0", "s", "s", s, s.lower(), "1.0"] for s in SENTENCES])}
  for task, (header, lines) in rows.items():
    (root / task).mkdir(parents=True)
    lines = ([header] if header else []) + lines
    (root / task / "dev.tsv").write_text("".join("\t".join(line) + "\n" for line in lines),
                                         encoding="utf-8")
  return root


def _encoder_folder(root):
  """A TF1 checkpoint folder: a 2-layer encoder of width 16 on MiniLM's vocabulary."""
  root.mkdir()
  vocab = (minilm_model_dir() / "vocab.txt").read_bytes()
  (root / "vocab.txt").write_bytes(vocab)
  config = tiny_bert_config(vocab.count(b"\n"))
  config.to_json_file(root / "bert_config.json", original_names=True)
  encoder = BertEncoder(config)
  tf1.save_tf1_checkpoint(encoder, str(root / "bert_model.ckpt"))
  return root


@pytest.mark.slow
def test_the_litert_file_packs_the_references_ids_and_serves_their_outputs(tmp_path):
  pytest.importorskip("ai_edge_litert")
  pytest.importorskip("onnxruntime")
  run = run_python(
      [sys.executable, str(SCRIPT), f"--glue_dir={_glue_folder(tmp_path / 'glue')}",
       f"--model_dir={_encoder_folder(tmp_path / 'encoder')}",
       "--sentences=16", "--max_seq_length=32", "--batch_size=8"],
      timeout=600, cwd=SCRIPT.parent, env={**os.environ, "BENCHMARK_RESULTS_DIR": str(tmp_path)})
  assert run.returncode == 0, run.stderr[-3000:]
  counts = re.findall(r"tokens, (\w+), against ([\w -]+): (\d+) of (\d+) sentences identical",
                      run.stdout)
  assert sorted((case, reference) for case, reference, _, _ in counts) == [
      ("cased", "FullTokenizer"), ("cased", "in-graph tokenizer"),
      ("uncased", "FullTokenizer"), ("uncased", "in-graph tokenizer")]
  assert all(same == total == "16" for _, _, same, total in counts), run.stdout
  differences = re.findall(r"(pooled_output|sequence_output) ([\d.e+-]+)", run.stdout)
  assert len(differences) == 4 and all(float(value) < 1e-4 for _, value in differences)
  assert "16 of 16 sentences identical" in (tmp_path / "litert_tokens.md").read_text()
