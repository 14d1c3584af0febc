"""Tests of the SavedModel exports.

Every exported kind is loaded and run in a separate process that imports only TensorFlow and
tensorflow-text (as TF Serving runs it), after the vocabulary files and model folders it came from
are deleted and the exports moved; its outputs must match the in-process Keras model on the ids
the data pipeline (`FullTokenizer` and the feature converters) gives.
"""

import base64
import concurrent.futures
import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from official_bert import (
  BertClassifier,
  BertEncoder,
  BertMultipleChoice,
  BertSpanLabeler,
  BertTokenClassifier,
  export_pretrained_dir,
  tokenization,
)
from official_bert.checkpoints import save_model_dir
from official_bert.data import classifier_data, classifier_features, conll, squad, swag
from official_bert.export import archive as archive_module
from official_bert.export import (
  export_classifier,
  export_encoder,
  export_model_dir,
  export_multiple_choice,
  export_span_labeler,
  export_token_classifier,
  signatures,
)
from official_bert.export.archive import EXPORT_MARK, write_archive
from official_bert.export.signatures import bucket_lengths
from official_bert.layers import TransformerBlock

from testing import (
  SHARED_DATA,
  assert_no_scheme_folders,
  file_uri,
  run_python,
  shared_data,
  tiny_bert_config,
  write_vocab,
)

SMALL_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
    "ran", "in", "park", "did", "it", "is", "not", "cafe", "cr", "##eme", "where", "what", "who",
    "again", "and", "to", "later", "##n", "##s", "##ed", ".", ",", "?", "!", "'", ":", "-", "t",
]
TEXTS = ["The cat sat on the mat.", "A dog ran in the park, didn't it?",
         "Café crème: the cat is not a dog!", "Zebras sat -- where? " + "the cat " * 20]
PAIRS = [("The cat sat on the mat.", "A dog sat on the mat?"),
         ("Did the dog run?", "It ran in the park."), ("cats", "dogs " * 20)]
SQUAD_WRITTEN = [("The cat sat on the mat. Later, the dog ran in the park, and the cat sat again!",
                  ["Where did the dog run?", "What sat on the mat?"])]
TAGGED_WRITTEN = [["The", "cat", "sat", "on", "the", "mat", "."],
                  ["A", "dog", "ran", "in", "Café", "park", "!"]]
SWAG_WRITTEN = [("The cat sat on the mat.", "The dog",
                 ["ran in the park.", "sat on the cat.", "is not a cat!", "did it again?"])]
TAGS = ["O", "B-person", "I-person"]
TOLERANCE = dict(atol=1e-5, rtol=1e-5)
SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "export_saved_model.py"
REAL_VOCAB = SHARED_DATA / "vocab" / "bert-base-uncased-vocab.txt"
# Real inputs for the kinds that use the real vocabulary; written ones when a clone lacks them.
REAL_FILES = ("vocab/bert-base-uncased-vocab.txt", "glue/SST-2/dev.tsv", "squad/dev-v1.1.json",
              "ner/wnut17/dev.conll", "swag/sample.jsonl")
# saved_model_cli loads each folder it shows; three kinds cover string, int and 3-D inputs.
CLI_FOLDERS = ("classifier", "span", "multiple_choice")

# Runs in the serving-like process: only tensorflow and tensorflow_text may be imported. It starts
# with the exports (importing TensorFlow takes seconds) and reads from stdin the requests and the
# folders to show with `saved_model_cli show --all` (the installed script, run in this process).
_LOADER = r"""
import base64, contextlib, io, json, runpy, sys
sys.modules["official_bert"] = None  # any import of it fails: the SavedModels must not need it
import tensorflow as tf
import tensorflow_text  # registers the tf.text ops, as TF Serving builds have them
import tensorflow.python.tools.saved_model_cli

def to_json(tensor):
  value = tensor.numpy()
  if value.dtype == object:
    return json.loads(json.dumps(value.tolist(), default=lambda b: b.decode("utf-8")))
  return value.tolist()

job = json.load(sys.stdin)
models, results = {}, {}
for request in job["requests"]:
  if request["dir"] not in models:
    models[request["dir"]] = tf.saved_model.load(request["dir"])
  function = models[request["dir"]].signatures[request["signature"]]
  inputs = {}
  for name, (dtype, value) in request["inputs"].items():
    if dtype == "base64":
      inputs[name] = tf.constant([base64.b64decode(v) for v in value])
    else:
      inputs[name] = tf.constant(value, dtype=dtype)
  results[request["key"]] = {name: to_json(t) for name, t in function(**inputs).items()}
signatures = {
    directory: {name: {key: [spec.dtype.name, spec.shape.as_list()]
                       for key, spec in function.structured_input_signature[1].items()}
                for name, function in model.signatures.items()}
    for directory, model in models.items()}
shown = {}
for directory in job["show"]:
  sys.argv = [job["cli"], "show", "--dir", directory, "--all"]
  with contextlib.redirect_stdout(io.StringIO()) as text:
    try:
      runpy.run_path(job["cli"], run_name="__main__")
    except SystemExit as exit_:
      assert not exit_.code, exit_.code
  shown[directory] = text.getvalue()
json.dump({"results": results, "signatures": signatures, "cli": shown}, sys.stdout)
"""




def _as_inputs(features):
  """The model inputs of a list of features with the original field names."""
  return {"input_word_ids": np.array([f.input_ids for f in features], np.int32),
          "input_mask": np.array([f.input_mask for f in features], np.int32),
          "input_type_ids": np.array([f.segment_ids for f in features], np.int32)}


def _array_inputs(features):
  """The model inputs of features that hold them as arrays (CoNLL, SWAG)."""
  return {name: np.asarray(getattr(features, name), np.int32)
          for name in ("input_word_ids", "input_mask", "input_type_ids")}


def _ids_request(key, directory, inputs):
  return {"key": key, "dir": directory, "signature": "serve_token_ids",
          "inputs": {name: ["int32", value.tolist()] for name, value in inputs.items()}}


def _text_request(key, directory, signature="serving_default", **texts):
  return {"key": key, "dir": directory, "signature": signature,
          "inputs": {name: ["string", value] for name, value in texts.items()}}


def _softmax(logits):
  exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return exp / exp.sum(axis=-1, keepdims=True)


class _Exports:
  """Builds every export, the in-process expectations, and the requests for the loader."""

  def __init__(self, root):
    self.root = root
    self.build = root / "build"
    self.real = all((SHARED_DATA / path).exists() for path in REAL_FILES)
    self.small_vocab = write_vocab(root / "small" / "vocab.txt", SMALL_VOCAB)
    self.real_vocab = None
    if self.real:
      self.real_vocab = str(root / "real" / "vocab.txt")
      os.makedirs(root / "real")
      shutil.copyfile(REAL_VOCAB, self.real_vocab)
    self.requests, self.expected, self.vocab_of = [], {}, {}
    self.script = None

  def _vocab(self):
    """The real uncased vocabulary and its size when present, else the small one."""
    if self.real:
      return self.real_vocab, len(tokenization.load_vocab(self.real_vocab))
    return self.small_vocab, len(SMALL_VOCAB)

  def _dir(self, name, vocab_file):
    self.vocab_of[name] = vocab_file
    return str(self.build / name)

  def classifier(self):
    vocab_file, size = self._vocab()
    texts = TEXTS
    if self.real:
      rows = (SHARED_DATA / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8")
      texts = [line.split("\t")[0] for line in rows.splitlines()[1:7]]
    model = BertClassifier(tiny_bert_config(size, hidden_size=32), num_classes=2)
    directory = self._dir("classifier", vocab_file)
    export_classifier(model, directory, vocab_file=vocab_file, do_lower_case=True,
                      max_seq_length=32, labels=["negative", "positive"], jit_compile=False)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    features = [classifier_features.convert_single_example(
        classifier_data.InputExample(f"dev-{i}", text), ["0", "1"], 32, tokenizer)
                for i, text in enumerate(texts)]
    inputs = _as_inputs(features)
    logits = np.asarray(model(inputs)["logits"])
    self.expected["classifier"] = logits
    examples = [base64.b64encode(classifier_features.to_tf_example(f).SerializeToString())
                .decode("ascii") for f in features]
    self.requests += [
        _text_request("classifier/text", directory, text=texts),
        _ids_request("classifier/ids", directory, inputs),
        {"key": "classifier/examples", "dir": directory, "signature": "serve_examples",
         "inputs": {"examples": ["base64", examples]}},
    ]

  def pair_regression(self, env):
    """Through the fine-tuned folder and the `export_saved_model.py` script, in a subprocess."""
    model = BertClassifier(tiny_bert_config(len(SMALL_VOCAB), hidden_size=32), num_classes=1)
    model_dir = self.root / "stsb_output"
    save_model_dir(model, model_dir, vocab_file=self.small_vocab, do_lower_case=True,
                   max_seq_length=24, is_regression=True, extra={"sentence_pair": True})
    directory = self._dir("pair_regression", str(model_dir / "vocab.txt"))
    # Both paths file:// URLs, as gs:// ones would be given; the serving flags as users write them.
    # The script runs beside the exports below, forked from a process that has imported
    # TensorFlow and the tools (`run_python`).
    beside = concurrent.futures.ThreadPoolExecutor(1)
    self.script = beside.submit(
        run_python, [sys.executable, SCRIPT, f"--model_dir={file_uri(model_dir)}",
                     f"--export_dir={file_uri(directory)}", "--buckets=8,16", "--nojit_compile"],
        cwd=self.root, env=env, timeout=300)
    beside.shutdown(wait=False)
    tokenizer = tokenization.FullTokenizer(self.small_vocab, do_lower_case=True)
    features = [classifier_features.convert_single_example(
        classifier_data.InputExample(f"dev-{i}", a, b, 0.0), [], 24, tokenizer,
        is_regression=True) for i, (a, b) in enumerate(PAIRS)]
    self.expected["pair_regression"] = np.asarray(model(_as_inputs(features))["logits"])
    self.requests.append(_text_request("pair/text", directory, text_a=[a for a, _ in PAIRS],
                                       text_b=[b for _, b in PAIRS]))

  def span(self):
    vocab_file, size = self._vocab()
    paragraphs = SQUAD_WRITTEN
    if self.real:
      with open(SHARED_DATA / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        articles = json.load(f)["data"][:2]
      paragraphs = [(a["paragraphs"][0]["context"],
                     [qa["question"] for qa in a["paragraphs"][0]["qas"][:2]]) for a in articles]
    squad_file = self.root / "squad.json"
    squad_file.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": [{"id": f"{p}-{q}", "question": question, "answers": []}
                                     for q, question in enumerate(questions)]}
        for p, (context, questions) in enumerate(paragraphs)]}]}))
    model = BertSpanLabeler(tiny_bert_config(size, hidden_size=32))
    directory = self._dir("span", vocab_file)
    export_span_labeler(model, directory, vocab_file=vocab_file, do_lower_case=True,
                        max_seq_length=64, max_query_length=12, max_answer_length=6,
                        jit_compile=False)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    examples, _ = squad.read_squad_examples(str(squad_file), is_training=False)
    features = [f for f in squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=64, doc_stride=32, max_query_length=12,
        is_training=False) if f.doc_span_index == 0]
    outputs = model(_as_inputs(features))
    contexts = [context for context, questions in paragraphs for _ in questions]
    self.expected["span"] = {
        "start_logits": np.asarray(outputs["start_logits"]),
        "end_logits": np.asarray(outputs["end_logits"]),
        "features": features, "contexts": contexts, "tokenizer": tokenizer}
    self.requests += [
        _text_request("span/text", directory, question=[e.question_text for e in examples],
                      context=contexts),
        _ids_request("span/ids", directory, _as_inputs(features)),
        _text_request("span/empty", directory, question=["where?"], context=[""]),
    ]

  def encoder(self):
    """A pre-trained folder, exported through `export_model_dir`."""
    encoder = BertEncoder(tiny_bert_config(len(SMALL_VOCAB), hidden_size=32))
    pretrained = self.root / "pretrained"
    export_pretrained_dir(encoder, encoder.config, pretrained, vocab_file=self.small_vocab)
    directory = self._dir("encoder", str(pretrained / "vocab.txt"))
    export_model_dir(pretrained, directory, do_lower_case=True, max_seq_length=24,
                     jit_compile=False)
    tokenizer = tokenization.FullTokenizer(self.small_vocab, do_lower_case=True)
    expected, inputs = {}, {}
    for name, pairs in (("single", [(text, None) for text in TEXTS]), ("pair", PAIRS)):
      features = [classifier_features.convert_single_example(
          classifier_data.InputExample(str(i), a, b), ["0"], 24, tokenizer)
                  for i, (a, b) in enumerate(pairs)]
      inputs[name] = _as_inputs(features)
      outputs = encoder(inputs[name])
      expected[name] = {"sequence_output": np.asarray(outputs["sequence_output"]),
                        "pooled_output": np.asarray(outputs["pooled_output"]),
                        "encoder_outputs": np.stack(outputs["encoder_outputs"]),
                        "input_mask": inputs[name]["input_mask"]}
    self.expected["encoder"] = expected
    self.requests += [
        _text_request("encoder/text", directory, text=TEXTS),
        _text_request("encoder/pair", directory, "serve_text_pair",
                      text_a=[a for a, _ in PAIRS], text_b=[b for _, b in PAIRS]),
        _ids_request("encoder/ids", directory, inputs["pair"]),
    ]

  def tagger(self):
    vocab_file, size = self._vocab()
    sentences = [conll.TaggedSentence(tuple(words), None, "written", 1)
                 for words in TAGGED_WRITTEN]
    if self.real:
      sentences = [conll.TaggedSentence(s.words, None, s.path, s.line) for s in
                   conll.read_conll_file(str(SHARED_DATA / "ner" / "wnut17" / "dev.conll"))[:4]]
    model = BertTokenClassifier(tiny_bert_config(size, hidden_size=32), num_classes=len(TAGS))
    directory = self._dir("tagger", vocab_file)
    export_token_classifier(model, directory, vocab_file=vocab_file, do_lower_case=True,
                            max_seq_length=64, labels=TAGS, jit_compile=False)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    features = conll.convert_sentences_to_features(sentences, TAGS, tokenizer, 64)
    assert len(features.sentence_index) == len(sentences), "a sentence was split"
    inputs = _array_inputs(features)
    texts = [" ".join(s.words) for s in sentences]
    tokens = [["[CLS]", *tokenizer.tokenize(text), "[SEP]"] for text in texts]
    self.expected["tagger"] = {
        "logits": np.asarray(model(inputs)["logits"]), "input_mask": inputs["input_mask"],
        "tokens": [row + ["[PAD]"] * (64 - len(row)) for row in tokens]}
    self.requests += [_text_request("tagger/text", directory, text=texts),
                      _ids_request("tagger/ids", directory, inputs)]

  def multiple_choice(self):
    vocab_file, size = self._vocab()
    examples = [swag.SwagExample(str(i), context, start, tuple(endings), None)
                for i, (context, start, endings) in enumerate(SWAG_WRITTEN)]
    if self.real:
      examples = swag.read_swag_examples(str(SHARED_DATA / "swag" / "sample.jsonl"))[:3]
    model = BertMultipleChoice(tiny_bert_config(size, hidden_size=32), num_choices=4)
    directory = self._dir("multiple_choice", vocab_file)
    export_multiple_choice(model, directory, vocab_file=vocab_file, do_lower_case=True,
                           max_seq_length=40, jit_compile=False)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    features = swag.convert_examples_to_features(examples, tokenizer, 40)
    inputs = _array_inputs(features)
    self.expected["multiple_choice"] = np.asarray(model(inputs)["logits"])
    self.requests += [
        _text_request("choice/text", directory, context=[e.context for e in examples],
                      endings=[[f"{e.start_ending} {ending}" for ending in e.endings]
                               for e in examples]),
        _ids_request("choice/ids", directory, inputs)]


@pytest.fixture(name="served", scope="module")
def fixture_served(tmp_path_factory):
  """Exports every kind, deletes their sources, moves them, and runs them in other processes.

  Without XLA: each request would compile its bucket's model on the loader's first call, and what
  XLA keeps in a SavedModel is `test_jit_compile_is_kept_in_the_saved_model`'s (and the buckets'
  `jit_compile=True` case's) to check."""
  root = tmp_path_factory.mktemp("exports")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  loader = subprocess.Popen([sys.executable, "-c", _LOADER], cwd=root, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
  exports = _Exports(root)
  try:
    exports.pair_regression(env)
    for build in (exports.classifier, exports.span, exports.encoder, exports.tagger,
                  exports.multiple_choice):
      build()
    script = exports.script.result()
    assert script.returncode == 0, f"export_saved_model.py failed:\n{script.stderr[-3000:]}"
    assert_no_scheme_folders(root)
    vocab_contents = {name: pathlib.Path(path).read_bytes()
                      for name, path in exports.vocab_of.items()}
    for folder in ("small", "real", "stsb_output", "pretrained"):
      shutil.rmtree(root / folder, ignore_errors=True)
    moved = root / "moved"
    os.rename(exports.build, moved)
    job = json.dumps({"requests": exports.requests, "cli": cli,
                      "show": [str(exports.build / name) for name in CLI_FOLDERS]})
    stdout, stderr = loader.communicate(job.replace(str(exports.build), str(moved)),
                                        timeout=300)
    assert loader.returncode == 0, f"the loading process failed:\n{stderr[-3000:]}"
  finally:
    if loader.poll() is None:
      loader.kill()
      loader.wait()
    if exports.script is not None:
      concurrent.futures.wait([exports.script])
  loaded = json.loads(stdout)
  return {"results": loaded["results"], "signatures": loaded["signatures"],
          "cli": loaded["cli"], "expected": exports.expected, "moved": moved,
          "vocab_contents": vocab_contents, "real": exports.real}


def _bucket_of(mask, seq_length):
  """The default bucket of a batch with this input mask."""
  longest = np.asarray(mask).sum(-1).max()
  return min(length for length in bucket_lengths(seq_length) if length >= longest)


def _close(actual, expected):
  np.testing.assert_allclose(np.asarray(actual, np.float32), expected, **TOLERANCE)


@pytest.mark.slow
def test_signatures_and_their_inputs(served):
  signatures = {os.path.basename(folder): value
                for folder, value in served["signatures"].items()}
  ids = {name: ["int32", [None, None]]
         for name in ("input_word_ids", "input_mask", "input_type_ids")}
  string = ["string", [None]]
  assert signatures["classifier"] == {
      "serving_default": {"text": string}, "serve_token_ids": ids,
      "serve_examples": {"examples": string}}
  assert signatures["pair_regression"]["serving_default"] == {"text_a": string, "text_b": string}
  assert signatures["span"] == {"serving_default": {"question": string, "context": string},
                                "serve_token_ids": ids}
  assert signatures["encoder"] == {"serving_default": {"text": string},
                                   "serve_text_pair": {"text_a": string, "text_b": string},
                                   "serve_token_ids": ids}
  assert signatures["tagger"] == {"serving_default": {"text": string}, "serve_token_ids": ids}
  assert signatures["multiple_choice"] == {
      "serving_default": {"context": string, "endings": ["string", [None, 4]]},
      "serve_token_ids": {name: ["int32", [None, 4, None]] for name in ids}}


@pytest.mark.slow
def test_saved_model_cli_lists_the_signatures(served):
  sections = served["cli"]
  assert sorted(sections) == [str(served["moved"] / name) for name in sorted(CLI_FOLDERS)]
  for folder, text in sections.items():
    names = served["signatures"][folder]
    for name, inputs in names.items():
      assert f"signature_def['{name}']:" in text
      for input_name in inputs:
        assert f"inputs['{input_name}'] tensor_info:" in text
  classifier = sections[str(served["moved"] / "classifier")]
  assert "dtype: DT_STRING" in classifier and "outputs['probabilities']" in classifier
  assert "Method name is: tensorflow/serving/predict" in classifier


@pytest.mark.slow
def test_vocabulary_travels_in_the_assets(served):
  for name, content in served["vocab_contents"].items():
    assets = served["moved"] / name / "assets"
    files = os.listdir(assets)
    assert len(files) == 1
    assert (assets / files[0]).read_bytes() == content


@pytest.mark.slow
def test_real_vocabulary_and_data_were_served(served):
  for path in REAL_FILES:
    shared_data(path)
  assert served["real"]
  for name in ("classifier", "span", "tagger", "multiple_choice"):
    assert served["vocab_contents"][name] == REAL_VOCAB.read_bytes()


@pytest.mark.slow
def test_classifier_matches_the_keras_model(served):
  logits = served["expected"]["classifier"]
  for key in ("classifier/text", "classifier/ids", "classifier/examples"):
    result = served["results"][key]
    _close(result["logits"], logits)
    _close(result["probabilities"], _softmax(logits))
    assert result["label_id"] == logits.argmax(-1).tolist()
    assert result["label"] == [["negative", "positive"][i] for i in logits.argmax(-1)]


@pytest.mark.slow
def test_pair_regression_from_the_model_folder_matches(served):
  result = served["results"]["pair/text"]
  _close(result["score"], served["expected"]["pair_regression"][:, 0])
  _close(result["logits"], served["expected"]["pair_regression"])


def _expected_span(features, start_logits, end_logits, max_answer_length=6):
  """The best (start, end) over each feature's context tokens, by brute force."""
  spans = []
  for feature, starts, ends in zip(features, start_logits, end_logits):
    context = sorted(feature.token_to_orig_map)
    spans.append(max(((s, e) for s in context for e in context if 0 <= e - s < max_answer_length),
                     key=lambda span: starts[span[0]] + ends[span[1]]))
  return spans


@pytest.mark.slow
def test_span_labeler_matches_and_answers_in_graph(served):
  expected = served["expected"]["span"]
  # The raw-text batch runs in the smallest bucket that holds it; the ids as given.
  bucket = _bucket_of(_as_inputs(expected["features"])["input_mask"], 64)
  for name in ("start_logits", "end_logits"):
    _agree_within_bucket(served["results"]["span/text"][name], expected[name], bucket)
    _close(served["results"]["span/ids"][name], expected[name])
  result = served["results"]["span/text"]
  tokenizer = expected["tokenizer"]
  spans = _expected_span(expected["features"], expected["start_logits"], expected["end_logits"])
  for i, (feature, context, (start, end)) in enumerate(
      zip(expected["features"], expected["contexts"], spans)):
    text = result["answer_text"][i]
    begin, stop = result["answer_start"][i], result["answer_end"][i]
    assert context[begin:stop] == text
    assert result["answer_score"][i] == pytest.approx(
        expected["start_logits"][i][start] + expected["end_logits"][i][end], abs=1e-4)
    # The answer is the best span widened to whole words: its pieces are the context's pieces
    # from `first` on, they cover [start, end], and the widening adds only "##" pieces.
    pieces = tokenizer.tokenize(context)
    start, end = start - min(feature.token_to_orig_map), end - min(feature.token_to_orig_map)
    first = len(tokenizer.tokenize(context[:begin]))
    last = first + len(tokenizer.tokenize(text)) - 1
    assert pieces[first:last + 1] == tokenizer.tokenize(text)
    assert first <= start <= end <= last
    assert all(piece.startswith("##") for piece in pieces[first + 1:start + 1])
    assert all(piece.startswith("##") for piece in pieces[end + 1:last + 1])
  empty = served["results"]["span/empty"]
  assert empty["answer_text"] == [""] and empty["answer_start"] == [0]
  assert empty["answer_score"] == [float("-inf")]


@pytest.mark.slow
def test_encoder_from_a_pretrained_folder_matches(served):
  expected = served["expected"]["encoder"]
  for key, name in (("encoder/text", "single"), ("encoder/pair", "pair"), ("encoder/ids", "pair")):
    result = served["results"][key]
    for output in ("sequence_output", "pooled_output", "encoder_outputs"):
      _close(result[output], expected[name][output])
    if key != "encoder/ids":
      assert result["input_mask"] == expected[name]["input_mask"].tolist()
  assert np.asarray(served["results"]["encoder/text"]["encoder_outputs"]).shape == (2, 4, 24, 32)


@pytest.mark.slow
def test_token_classifier_matches_and_returns_the_wordpieces(served):
  expected = served["expected"]["tagger"]
  # Past its bucket the raw-text batch has zero logits, so uniform probabilities and tag 0.
  bucket = _bucket_of(expected["input_mask"], 64)
  text_logits = expected["logits"].copy()
  text_logits[:, bucket:] = 0
  for key, logits in (("tagger/text", text_logits), ("tagger/ids", expected["logits"])):
    result = served["results"][key]
    _close(result["logits"], logits)
    _close(result["probabilities"], _softmax(logits))
    assert result["label"] == [[TAGS[i] for i in row] for row in logits.argmax(-1)]
  assert served["results"]["tagger/text"]["tokens"] == expected["tokens"]


@pytest.mark.slow
def test_multiple_choice_matches(served):
  logits = served["expected"]["multiple_choice"]
  for key in ("choice/text", "choice/ids"):
    result = served["results"][key]
    _close(result["logits"], logits)
    _close(result["probabilities"], _softmax(logits))
    assert result["choice"] == logits.argmax(-1).tolist()


@pytest.fixture(name="small_classifier")
def fixture_small_classifier(tmp_path):
  vocab_file = write_vocab(tmp_path / "vocab" / "vocab.txt", SMALL_VOCAB)
  model = BertClassifier(tiny_bert_config(len(SMALL_VOCAB), num_hidden_layers=1), num_classes=2)
  return model, dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=16)


def test_refuses_a_non_empty_export_dir(tmp_path, small_classifier):
  model, options = small_classifier
  export_dir = tmp_path / "export"
  export_dir.mkdir()
  (export_dir / "keep.txt").write_text("precious")
  for overwrite in (False, True):  # an export never replaces files that are not an export
    with pytest.raises(FileExistsError, match="holds files that are no export of this package"):
      export_classifier(model, export_dir, overwrite=overwrite, **options)
  assert os.listdir(export_dir) == ["keep.txt"]


def test_a_failed_export_leaves_nothing_half_written(tmp_path, small_exports, monkeypatch):
  model, options, exports = small_exports
  export_dir = tmp_path / "exports" / "1"
  shutil.copytree(exports[False]["dir"], export_dir)  # an earlier export of the package
  fingerprint = (export_dir / "fingerprint.pb").read_bytes()

  def write_half_then_fail(self, filepath, **kwargs):
    os.makedirs(os.path.join(filepath, "variables"))
    with open(os.path.join(filepath, "saved_model.pb"), "wb") as f:
      f.write(b"half")
    raise OSError("disk full")

  monkeypatch.setattr(type(keras.export.ExportArchive()), "write_out", write_half_then_fail)
  with pytest.raises(OSError, match="disk full"):
    export_classifier(model, export_dir, overwrite=True, **options)
  with pytest.raises(OSError, match="disk full"):
    export_classifier(model, tmp_path / "exports" / "2", **options)
  assert os.listdir(tmp_path / "exports") == ["1"]
  assert (export_dir / "fingerprint.pb").read_bytes() == fingerprint
  assert sorted(os.listdir(export_dir)) == ["assets", "fingerprint.pb", EXPORT_MARK,
                                            "saved_model.pb", "variables"]


@pytest.fixture(name="small_exports", scope="module")
def fixture_small_exports(tmp_path_factory):
  """The small classifier, its export options, and its exports without and with XLA, by
  `jit_compile`, each with the names of the TransformerBlocks its export traced."""
  root = tmp_path_factory.mktemp("small_exports")
  vocab_file = write_vocab(root / "vocab" / "vocab.txt", SMALL_VOCAB)
  model = BertClassifier(tiny_bert_config(len(SMALL_VOCAB), num_hidden_layers=1), num_classes=2)
  options = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=16)
  exports = {}
  for jit_compile in (False, True):
    traced = []
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(TransformerBlock, "call", _counting_traces(TransformerBlock.call, traced))
      export_dir = root / f"jit_compile_{jit_compile}"
      export_classifier(model, export_dir, jit_compile=jit_compile, **options)
    exports[jit_compile] = {"dir": export_dir, "traced": traced}
  return model, options, exports


def _counting_traces(call, traced):
  """`call`, which appends the layer's name to `traced` when it runs in a graph."""
  @functools.wraps(call)  # Keras reads the signature of `call`
  def counted(self, *args, **kwargs):
    if tf.inside_function():  # not the eager calls that build a serving copy of the model
      traced.append(self.name)
    return call(self, *args, **kwargs)
  return counted


@pytest.mark.parametrize("jit_compile", [False, True])
def test_the_export_traces_the_model_once_for_all_its_signatures(small_exports, jit_compile):
  # Three signatures (raw text, token ids, tf.Examples) call one function of the model.
  model, _, exports = small_exports
  assert len(exports[jit_compile]["traced"]) == 1
  served = tf.saved_model.load(str(exports[jit_compile]["dir"])).signatures
  ids = {"input_word_ids": tf.constant([[2, 5, 6, 3]]), "input_mask": tf.constant([[1, 1, 1, 1]]),
         "input_type_ids": tf.constant([[0, 0, 0, 0]])}
  np.testing.assert_allclose(served["serve_token_ids"](**ids)["logits"],
                             model(ids, training=False)["logits"], atol=1e-5)
  np.testing.assert_allclose(served["serving_default"](text=tf.constant(["the cat"]))["logits"],
                             served["serve_token_ids"](**ids)["logits"], atol=1e-5)


def test_the_export_traces_each_endpoint_once(tmp_path, monkeypatch):
  model = keras.Sequential([keras.layers.Dense(2)])
  model.build((None, 3))
  traces = []

  def serve(inputs):
    traces.append(1)
    return {"outputs": model(inputs)}

  def export(export_dir):
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", serve, [tf.TensorSpec([None, 3], tf.float32)])
    write_archive(archive, export_dir)

  export(tmp_path / "once")
  assert len(traces) == 1
  inputs = tf.constant([[1.0, 2.0, 3.0]])
  loaded = tf.saved_model.load(str(tmp_path / "once"))
  np.testing.assert_allclose(loaded.serve(inputs)["outputs"].numpy(), model(inputs).numpy(),
                             rtol=1e-6)
  # Without the save context the same export traces twice (what the archive's step avoids).
  monkeypatch.setattr(archive_module, "_trace_once_for_saving", lambda archive: None)
  export(tmp_path / "twice")
  assert len(traces) == 3


def test_invalid_arguments_fail_before_writing(tmp_path, small_classifier):
  model, options = small_classifier
  with pytest.raises(ValueError, match="3 labels given for a model with 2 classes"):
    export_classifier(model, tmp_path / "a", labels=["x", "y", "z"], **options)
  with pytest.raises(ValueError, match="max_position_embeddings"):
    export_classifier(model, tmp_path / "b", **{**options, "max_seq_length": 1000})
  span = BertSpanLabeler(model.config)
  with pytest.raises(ValueError, match="max_query_length"):
    export_span_labeler(span, tmp_path / "c", max_query_length=14, **options)
  assert os.listdir(tmp_path) == ["vocab"]


def test_bucket_lengths():
  assert bucket_lengths(128) == (16, 32, 64, 128)
  assert bucket_lengths(384) == (16, 32, 64, 128, 256, 384)
  assert bucket_lengths(24) == (16, 24)
  assert bucket_lengths(10) == (10,)
  assert bucket_lengths(128, ()) == (128,)
  assert bucket_lengths(128, [96, 24, 24]) == (24, 96, 128)
  for bad in ([2], [129], [16.5], [True]):
    with pytest.raises(ValueError, match="between 3 and max_seq_length"):
      bucket_lengths(128, bad)


# Mixed lengths: a batch of short texts fits the 16 bucket, one long text needs the longest. Both
# batches hold four texts: an export padded to max_seq_length compiles its XLA model once for both.
SHORT_TEXTS = ["the cat sat", "a dog ran in the park", "what?", "the dog sat on the mat"]
MIXED_TEXTS = SHORT_TEXTS[:3] + ["the cat sat on the mat and the dog ran in the park " * 4]


def _agree_within_bucket(bucketed, padded, bucket, axis=1):
  """Equal on the first `bucket` positions of the sequence `axis` (padding in it included: each
  position attends to the real tokens only), and zero after them, where the bucketed model did
  not run."""
  bucketed, padded = np.asarray(bucketed), np.asarray(padded)
  assert bucketed.shape == padded.shape
  within = (slice(None),) * axis + (slice(None, bucket),)
  np.testing.assert_allclose(bucketed[within], padded[within], **TOLERANCE)
  after = (slice(None),) * axis + (slice(bucket, None),)
  assert not bucketed[after].any()


def test_trimming_to_a_bucket_keeps_the_outputs_on_the_real_tokens(tmp_path):
  """The unit under the bucketed signatures, in process: raw text packed to max_seq_length, then
  cut to its bucket, gives the same encoder, classifier and span outputs on the bucket's positions
  (the exports themselves: `test_buckets_do_not_change_results`)."""
  config = tiny_bert_config(len(SMALL_VOCAB))
  classifier, span = BertClassifier(config, num_classes=3), BertSpanLabeler(config)
  packer = signatures.TextPacker(write_vocab(tmp_path / "vocab.txt", SMALL_VOCAB), True, 32)
  assert packer.buckets == (16, 32)
  for texts, bucket in ((SHORT_TEXTS, 16), (MIXED_TEXTS, 32)):
    padded = packer(tf.constant(texts))
    trimmed = packer.trim(padded)
    assert all(value.shape == (len(texts), bucket) for value in trimmed.values())
    for name, value in trimmed.items():
      np.testing.assert_array_equal(value, padded[name][:, :bucket])
    assert not padded["input_mask"][:, bucket:].numpy().any()
    full, cut = classifier.encoder(padded), classifier.encoder(trimmed)
    np.testing.assert_allclose(cut["sequence_output"], full["sequence_output"][:, :bucket],
                               **TOLERANCE)
    np.testing.assert_allclose(cut["pooled_output"], full["pooled_output"], **TOLERANCE)
    np.testing.assert_allclose(classifier(trimmed)["logits"], classifier(padded)["logits"],
                               **TOLERANCE)
    for output in ("start_logits", "end_logits"):
      np.testing.assert_allclose(span(trimmed)[output], span(padded)[output][:, :bucket],
                                 **TOLERANCE)


# Exports, bucketed and padded, and their signatures' calls: the unit above is the fast lane's
# check of buckets. Under XLA (a compile per bucket) the encoder alone, whose outputs hold every
# position; without it the span labeler too, whose question-and-context packing and in-graph answer
# differ from the encoder's. A classifier's signature trims as the encoder's does and puts its
# head on the pooled output, which the encoder's check covers; the `served` classifier, exported
# with the default buckets, is also compared with the Keras model on inputs padded to 32.
@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [True, False])
def test_buckets_do_not_change_results(tmp_path, jit_compile):
  """Bucketed exports agree with ones padded to max_seq_length, on short and mixed batches."""
  vocab_file = write_vocab(tmp_path / "vocab" / "vocab.txt", SMALL_VOCAB)
  config = tiny_bert_config(len(SMALL_VOCAB))
  # Buckets 16 and 32 (= max_seq_length): the short texts fill the first, the long one the last.
  options = dict(vocab_file=vocab_file, do_lower_case=True, max_seq_length=32)
  span = BertSpanLabeler(config)
  kinds = ("encoder",) if jit_compile else ("encoder", "span")
  loaded = {}
  for name, buckets in (("padded", ()), ("bucketed", None)):
    common = dict(options, buckets=buckets, jit_compile=jit_compile)
    exports = {
        "encoder": lambda path, common=common: export_encoder(span.encoder, path, **common),
        "span": lambda path, common=common: export_span_labeler(span, path, max_query_length=8,
                                                                 **common)}
    loaded[name] = {kind: tf.saved_model.load(str(exports[kind](tmp_path / name / kind)))
                    .signatures["serving_default"] for kind in kinds}
  for texts, bucket in ((SHORT_TEXTS, 16), (MIXED_TEXTS, 32)):
    text = tf.constant(texts)
    inputs = {"encoder": {"text": text},
              "span": {"question": tf.constant(["what?"] * len(texts)), "context": text}}
    padded, bucketed = ({kind: function(**inputs[kind]) for kind, function in functions.items()}
                        for functions in (loaded["padded"], loaded["bucketed"]))
    mask = padded["encoder"]["input_mask"].numpy()
    assert mask.sum(-1).max() > 16 if bucket == 32 else mask.sum(-1).max() <= 16
    assert bucketed["encoder"]["input_mask"].numpy().tolist() == mask.tolist()
    _agree_within_bucket(bucketed["encoder"]["sequence_output"],
                         padded["encoder"]["sequence_output"], bucket)
    _agree_within_bucket(bucketed["encoder"]["encoder_outputs"],
                         padded["encoder"]["encoder_outputs"], bucket, axis=2)
    np.testing.assert_allclose(bucketed["encoder"]["pooled_output"],
                               padded["encoder"]["pooled_output"], **TOLERANCE)
    if jit_compile:
      continue
    for output in ("start_logits", "end_logits"):
      _agree_within_bucket(bucketed["span"][output], padded["span"][output], bucket)
    for output in ("answer_text", "answer_start", "answer_end"):
      assert bucketed["span"][output].numpy().tolist() == padded["span"][output].numpy().tolist()
    np.testing.assert_allclose(bucketed["span"]["answer_score"], padded["span"]["answer_score"],
                               **TOLERANCE)


def _xla_functions(export_dir):
  """Names of the SavedModel's functions marked for XLA compilation."""
  saved = saved_model_pb2.SavedModel()
  saved.ParseFromString((pathlib.Path(export_dir) / "saved_model.pb").read_bytes())
  return [f.signature.name for f in saved.meta_graphs[0].graph_def.library.function
          if f.attr["_XlaMustCompile"].b]


def test_jit_compile_is_kept_in_the_saved_model(small_exports):
  model, _, exports = small_exports
  assert not _xla_functions(exports[False]["dir"])
  assert _xla_functions(exports[True]["dir"])
  ids = {"input_word_ids": tf.constant([[2, 5, 6, 3, 0]]),
         "input_mask": tf.constant([[1, 1, 1, 1, 0]]), "input_type_ids": tf.zeros([1, 5], tf.int32)}
  served = tf.saved_model.load(str(exports[True]["dir"])).signatures["serve_token_ids"](**ids)
  np.testing.assert_allclose(served["logits"], model(ids)["logits"], **TOLERANCE)
