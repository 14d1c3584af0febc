"""Tests for the classification readers: GLUE files, the user's own files and TFDS."""

import logging

import pytest

from official_bert.data import classifier_processors, custom_data, glue, tfds_data
from official_bert.data.classifier_data import DataError, InputExample

from testing import shared_data

BOM = "\ufeff"


def write(folder, name, lines):
  """Writes `lines` (joined by newlines, ending with one) to `folder/name` as UTF-8."""
  path = folder / name
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return path


def tsv(*fields):
  return "\t".join(fields)


# --- GLUE, on rows written here in each task's official format -------------------------------

MNLI_TRAIN_HEADER = tsv("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                        "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                        "sentence2", "label1", "gold_label")
MNLI_DEV_HEADER = tsv(*MNLI_TRAIN_HEADER.split("\t")[:11], "label2", "label3", "label4", "label5",
                      "gold_label")
MNLI_TEST_HEADER = tsv(*MNLI_TRAIN_HEADER.split("\t")[:10])
PARSES = ("( ( A b ) )", "( c )", "(ROOT (S A b))", "(ROOT (NP c))")


def mnli_row(index, premise, hypothesis, *labels):
  return tsv(str(index), "31193", f"{index}n", "government", *PARSES, premise, hypothesis, *labels)


# task -> {file name: lines}, and the examples expected from each split.
GLUE_FILES = {
    "CoLA": {
        "train.tsv": [tsv("gj04", "1", "", "Our friends won't buy this analysis."),
                      tsv("gj04", "0", "*", "The more we study verbs, the crazier they get get.")],
        "dev.tsv": [tsv("cj99", "1", "", 'He said "go.')],
        "test.tsv": ["index\tsentence", tsv("0", "Bill whistled past the house.")],
    },
    "SST-2": {
        "train.tsv": ["sentence\tlabel", tsv("hide new secretions from the parental units ", "0")],
        "dev.tsv": ["sentence\tlabel", tsv("it 's a charming journey . ", "1")],
        "test.tsv": ["index\tsentence", tsv("0", "uneasy mishmash of styles and genres .")],
    },
    "MRPC": {
        "train.tsv": [BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
                      tsv("1", "702876", "702977", 'He called "the witness", a liar.',
                          'Referring to him as "the witness.')],
        "dev.tsv": [BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
                    tsv("0", "1", "2", "The dollar was at 116.92 yen.", '"The yen was flat.')],
        "test.tsv": ["index\t#1 ID\t#2 ID\t#1 String\t#2 String",
                     tsv("0", "1089874", "1089925", "PCCW's chief will report.", "He reports.")],
    },
    "STS-B": {
        "train.tsv": [tsv("index", "genre", "filename", "year", "old_index", "source1", "source2",
                          "sentence1", "sentence2", "score"),
                      tsv("0", "main-captions", "MSRvid", "2012test", "0001", "none", "none",
                          "A plane is taking off.", "An air plane is taking off.", "5.000")],
        "dev.tsv": [tsv("index", "genre", "filename", "year", "old_index", "source1", "source2",
                        "sentence1", "sentence2", "score"),
                    tsv("0", "main-captions", "MSRvid", "2012test", "0000", "none", "none",
                        "A man is dancing.", "A man wearing a hat is dancing.", "3.800")],
        "test.tsv": [tsv("index", "genre", "filename", "year", "old_index", "source1", "source2",
                         "sentence1", "sentence2"),
                     tsv("0", "main-captions", "MSRvid", "2012test", "0024", "none", "none",
                         "A girl is styling her hair.", "A girl is brushing her hair.")],
    },
    "QQP": {
        "train.tsv": [tsv("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
                      tsv("133273", "213221", "213222", "How is the life of a math student?",
                          "Which level of prepration is enough?", "0")],
        "dev.tsv": [tsv("id", "qid1", "qid2", "question1", "question2", "is_duplicate"),
                    tsv("201359", "303345", "303346", "Why are African-Americans so beautiful?",
                        "Why are hispanics so beautiful?", "1")],
        "test.tsv": [tsv("id", "question1", "question2"),
                     tsv("0", "Why do rockets look white?", "Why are rockets white?")],
    },
    "MNLI": {
        "train.tsv": [MNLI_TRAIN_HEADER,
                      mnli_row(0, "Conceptually cream skimming has two dimensions.",
                               "Product and geography are what make it work.", "neutral",
                               "neutral")],
        "dev_matched.tsv": [MNLI_DEV_HEADER,
                            mnli_row(0, "The new rights are nice enough", "Everyone likes them",
                                     "neutral", "entailment", "neutral", "neutral", "neutral",
                                     "neutral")],
        "dev_mismatched.tsv": [MNLI_DEV_HEADER,
                               mnli_row(0, "Your contribution helped.", "It did not help.",
                                        "contradiction", "contradiction", "contradiction",
                                        "contradiction", "contradiction", "contradiction")],
        "test_matched.tsv": [MNLI_TEST_HEADER, mnli_row(0, "Hierbas is a herb.", "It is a herb.")],
        "test_mismatched.tsv": [MNLI_TEST_HEADER, mnli_row(0, "What a day.", "A day.")],
    },
    "QNLI": {
        "train.tsv": ["index\tquestion\tsentence\tlabel",
                      tsv("0", "When did the third Digimon series begin?",
                          "Unlike the two seasons before it, it is darker.", "not_entailment")],
        "dev.tsv": ["index\tquestion\tsentence\tlabel",
                    tsv("0", "What came into force?", "The law came into force.", "entailment")],
        "test.tsv": ["index\tquestion\tsentence",
                     tsv("0", "What is a watt?", "A watt is a unit of power.")],
    },
    "RTE": {
        "train.tsv": ["index\tsentence1\tsentence2\tlabel",
                      tsv("0", "No weapons were found.", "Weapons were found.", "not_entailment")],
        "dev.tsv": ["index\tsentence1\tsentence2\tlabel",
                    tsv("0", "Dana Reeve died.", "Christopher Reeve had an accident.",
                        "not_entailment")],
        "test.tsv": ["index\tsentence1\tsentence2",
                     tsv("0", "Mangla was built in 1967.", "Mangla is a dam.")],
    },
    "WNLI": {
        "train.tsv": ["index\tsentence1\tsentence2\tlabel",
                      tsv("0", "I stuck a pin through a carrot.", "The carrot had a hole.", "1")],
        "dev.tsv": ["index\tsentence1\tsentence2\tlabel",
                    tsv("0", "The drain is clogged with hair.", "The hair has to be cleaned.",
                        "0")],
        "test.tsv": ["index\tsentence1\tsentence2",
                     tsv("0", "Maude and Dora had seen the trains.", "Dora had seen them.")],
    },
    "AX": {
        "diagnostic.tsv": ["index\tsentence1\tsentence2",
                           tsv("0", "The cat sat on the mat.", "The cat did not sit on the mat.")],
    },
}

EXPECTED = {
    ("CoLA", "train"): [
        InputExample("train-0", "Our friends won't buy this analysis.", None, "1"),
        InputExample("train-1", "The more we study verbs, the crazier they get get.", None, "0")],
    ("CoLA", "dev"): [InputExample("dev-0", 'He said "go.', None, "1")],
    ("CoLA", "test"): [InputExample("test-0", "Bill whistled past the house.")],
    ("SST-2", "train"): [
        InputExample("train-0", "hide new secretions from the parental units ", None, "0")],
    ("SST-2", "test"): [InputExample("test-0", "uneasy mishmash of styles and genres .")],
    ("MRPC", "train"): [InputExample("train-0", 'He called "the witness", a liar.',
                                     'Referring to him as "the witness.', "1")],
    # An opening quote with no closing one is text: GLUE files are read with csv.QUOTE_NONE.
    ("MRPC", "dev"): [InputExample("dev-0", "The dollar was at 116.92 yen.", '"The yen was flat.',
                                   "0")],
    ("MRPC", "test"): [InputExample("test-0", "PCCW's chief will report.", "He reports.")],
    ("STS-B", "train"): [InputExample("train-0", "A plane is taking off.",
                                      "An air plane is taking off.", 5.0)],
    ("STS-B", "dev"): [InputExample("dev-0", "A man is dancing.",
                                    "A man wearing a hat is dancing.", 3.8)],
    ("STS-B", "test"): [InputExample("test-0", "A girl is styling her hair.",
                                     "A girl is brushing her hair.")],
    ("QQP", "train"): [InputExample("train-133273", "How is the life of a math student?",
                                    "Which level of prepration is enough?", "0")],
    ("QQP", "dev"): [InputExample("dev-201359", "Why are African-Americans so beautiful?",
                                  "Why are hispanics so beautiful?", "1")],
    ("QQP", "test"): [InputExample("test-0", "Why do rockets look white?",
                                   "Why are rockets white?")],
    ("MNLI", "train"): [InputExample("train-0", "Conceptually cream skimming has two dimensions.",
                                     "Product and geography are what make it work.", "neutral")],
    ("MNLI", "dev"): [InputExample("dev-0", "The new rights are nice enough",
                                   "Everyone likes them", "neutral")],
    ("MNLI", "dev_mismatched"): [InputExample("dev_mismatched-0", "Your contribution helped.",
                                              "It did not help.", "contradiction")],
    ("MNLI", "test"): [InputExample("test-0", "Hierbas is a herb.", "It is a herb.")],
    ("MNLI", "test_mismatched"): [InputExample("test_mismatched-0", "What a day.", "A day.")],
    ("QNLI", "train"): [InputExample("train-0", "When did the third Digimon series begin?",
                                     "Unlike the two seasons before it, it is darker.",
                                     "not_entailment")],
    ("QNLI", "test"): [InputExample("test-0", "What is a watt?", "A watt is a unit of power.")],
    ("RTE", "dev"): [InputExample("dev-0", "Dana Reeve died.",
                                  "Christopher Reeve had an accident.", "not_entailment")],
    ("RTE", "test"): [InputExample("test-0", "Mangla was built in 1967.", "Mangla is a dam.")],
    ("WNLI", "train"): [InputExample("train-0", "I stuck a pin through a carrot.",
                                     "The carrot had a hole.", "1")],
    ("WNLI", "test"): [InputExample("test-0", "Maude and Dora had seen the trains.",
                                    "Dora had seen them.")],
    ("AX", "test"): [InputExample("test-0", "The cat sat on the mat.",
                                  "The cat did not sit on the mat.")],
}

LABELS = {
    "CoLA": ["0", "1"], "SST-2": ["0", "1"], "MRPC": ["0", "1"], "STS-B": [], "QQP": ["0", "1"],
    "MNLI": ["contradiction", "entailment", "neutral"], "QNLI": ["entailment", "not_entailment"],
    "RTE": ["entailment", "not_entailment"], "WNLI": ["0", "1"],
    "AX": ["contradiction", "entailment", "neutral"],
}


@pytest.fixture
def glue_dir(tmp_path):
  for task, files in GLUE_FILES.items():
    (tmp_path / task).mkdir()
    for name, lines in files.items():
      write(tmp_path / task, name, lines)
  return tmp_path


@pytest.mark.parametrize("task,split", sorted(EXPECTED))
def test_glue_reader_on_official_format(glue_dir, task, split):
  processor = classifier_processors.get_processor(task, glue_dir / task)
  assert processor.get_examples(split) == EXPECTED[(task, split)]
  assert processor.get_labels() == LABELS[task]
  assert processor.is_regression == (task == "STS-B")
  assert set(processor.skipped_rows.values()) == {0}


def test_glue_split_names_and_task_names(glue_dir):
  mnli = glue.GlueProcessor("mnli", glue_dir / "MNLI")
  assert mnli.get_dev_examples() == mnli.get_examples("dev")
  assert mnli.get_examples("dev_matched")[0].label == "neutral"
  assert mnli.get_examples("test_matched")[0].label is None
  assert glue.GlueProcessor("sts_b", glue_dir / "STS-B").task.name == "STS-B"
  assert glue.GlueProcessor("sst2", glue_dir / "SST-2").task.name == "SST-2"
  ax = glue.GlueProcessor("diagnostic", glue_dir / "AX")
  assert ax.splits == ("test",)
  with pytest.raises(ValueError, match="no split 'train'; choose one of \\['test'\\]"):
    ax.get_train_examples()
  with pytest.raises(ValueError, match="Unknown GLUE task 'squad'"):
    classifier_processors.get_processor("squad", glue_dir)
  with pytest.raises(FileNotFoundError, match="none of \\['dev.tsv'\\] is in"):
    glue.GlueProcessor("RTE", glue_dir / "AX").get_dev_examples()


def test_glue_malformed_rows_name_file_line_and_column(tmp_path):
  header = "index\tsentence1\tsentence2\tlabel"
  cases = [
      ([header, tsv("0", "a", "b", "entailment"), tsv("1", "a", "entailment")],
       "train.tsv:3: expected 4 tab-separated fields, found 3"),
      ([header, tsv("0", "a", " ", "entailment")], "train.tsv:2: column 'sentence2' is empty"),
      ([header, tsv("0", "a", "b", "maybe")],
       "train.tsv:2: column 'label' is 'maybe', not one of the RTE labels"),
      (["index\tsentence1\tlabel", tsv("0", "a", "entailment")],
       "train.tsv:1: the header lacks column\\(s\\) \\['sentence2'\\]"),
      ([header], "train.tsv: the file has a header but no rows"),
      ([], "train.tsv: the file is empty"),
  ]
  for lines, message in cases:
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    with pytest.raises(DataError, match=message):
      glue.GlueProcessor("RTE", tmp_path).get_train_examples()


def test_glue_score_and_headerless_errors(tmp_path):
  write(tmp_path, "train.tsv", ["index\tsentence1\tsentence2\tscore",
                                tsv("0", "a", "b", "4.2"), tsv("1", "a", "b", "high")])
  with pytest.raises(DataError, match="train.tsv:3: column 'score' is 'high', not a number"):
    glue.GlueProcessor("STS-B", tmp_path).get_train_examples()
  write(tmp_path, "dev.tsv", [tsv("gj04", "1", "", "Fine."), tsv("gj04", "", "Broken.")])
  with pytest.raises(DataError, match="dev.tsv:2: expected 4 tab-separated fields, found 3"):
    glue.GlueProcessor("CoLA", tmp_path).get_dev_examples()


def test_qqp_rows_with_missing_fields_are_skipped_counted_and_logged(tmp_path, caplog):
  # The official QQP train file has rows like this one, which lost fields to a stray newline.
  header = tsv("id", "qid1", "qid2", "question1", "question2", "is_duplicate")
  path = write(tmp_path, "train.tsv", [header, tsv("1", "2", "3", "Why?", "Why not?", "0"),
                                       tsv("", "Was Muhammad a real historical figure?", "0"),
                                       tsv("4", "5", "6", "How?", "How so?", "1")])
  processor = glue.GlueProcessor("QQP", tmp_path)
  with caplog.at_level(logging.WARNING):
    examples = processor.get_train_examples()
  assert [example.guid for example in examples] == ["train-1", "train-4"]
  assert processor.skipped_rows == {str(path): 1}
  assert f"Skipped 1 malformed row(s) of {path} (lines 3)" in caplog.text
  with pytest.raises(DataError, match="train.tsv:3: expected 6 tab-separated fields, found 3"):
    glue.GlueProcessor("QQP", tmp_path, skip_malformed_rows=False).get_train_examples()


def test_bytes_that_are_not_utf8_are_dropped_counted_and_reported(tmp_path, caplog):
  # Latin-1 text in a GLUE file: the original decoded with "ignore", dropping the stray bytes.
  path = tmp_path / "train.tsv"
  path.write_bytes(b"\xef\xbb\xbfsentence\tlabel\ncaf\xe9 cr\xe8me\t1\nfine\t0\r\nna\xefve\t1\n")
  processor = glue.GlueProcessor("SST-2", tmp_path)
  with caplog.at_level(logging.WARNING):
    examples = processor.get_train_examples()
  assert [(e.text_a, e.label) for e in examples] == [("caf crme", "1"), ("fine", "0"),
                                                     ("nave", "1")]
  assert processor.dropped_bytes == {str(path): 3}
  assert (f"{path}: dropped 3 byte(s) that are not UTF-8 on 2 line(s) (lines 2, 4), as the "
          "original did") in caplog.text


@pytest.mark.parametrize("name, content, line", [
    ("train.csv", b'text,label\n"caf\xe9, ok",a\nfine,b\n', 2),
    ("train.jsonl", b'{"text": "caf\xe9, ok", "label": "a"}\n{"text": "fine", "label": "b"}\n', 1)])
def test_custom_files_drop_and_count_bytes_that_are_not_utf8(tmp_path, caplog, name, content,
                                                             line):
  (tmp_path / name).write_bytes(content)
  processor = custom_data.CustomProcessor(tmp_path, text_a_column="text", label_column="label")
  with caplog.at_level(logging.WARNING):
    examples = processor.get_train_examples()
  assert [e.text_a for e in examples] == ["caf, ok", "fine"]
  assert processor.dropped_bytes == {str(tmp_path / name): 1}
  assert f"dropped 1 byte(s) that are not UTF-8 on 1 line(s) (line {line})" in caplog.text


def test_line_ends_and_byte_order_mark_are_read_as_before(tmp_path):
  # CR, CR LF and LF end lines, as open(newline="") splits them; a quoted CSV field spans lines.
  (tmp_path / "train.csv").write_bytes(
      b'\xef\xbb\xbftext,label\r"two\nlines",a\r\nthree,b\rfour,a\n')
  processor = custom_data.CustomProcessor(tmp_path, text_a_column="text", label_column="label")
  assert [(e.text_a, e.label) for e in processor.get_train_examples()] == [
      ("two\nlines", "a"), ("three", "b"), ("four", "a")]
  assert processor.dropped_bytes == {str(tmp_path / "train.csv"): 0}


XNLI_DEV_HEADER = tsv("language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse",
                      "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "promptID",
                      "pairID", "genre", "label1", "label2", "label3", "label4", "label5")


def xnli_dev_row(language, label, premise, hypothesis, pair_id):
  return tsv(language, label, "(x)", "(y)", "(ROOT x)", "(ROOT y)", premise, hypothesis, "1",
             pair_id, "fiction", label, label, label, label, label)


def write_xnli(folder):
  """The files of XNLI-1.0 (`xnli.dev.tsv`) and XNLI-MT-1.0 (`multinli/`) as the original reads
  them; the training files use MultiNLI's `contradictory` for `contradiction`."""
  (folder / "multinli").mkdir(parents=True)
  write(folder / "multinli", "multinli.train.zh.tsv", [
      tsv("premise", "hypo", "label"), tsv("他 来 了", "他 走 了", "contradictory"),
      tsv("天 很 蓝", "天 是 蓝 的", "entailment"), tsv("我 饿 了", "我 想 吃饭", "neutral")])
  write(folder / "multinli", "multinli.train.de.tsv", [
      tsv("premise", "hypo", "label"), tsv("Er kam", "Er ging", "contradictory")])
  write(folder, "xnli.dev.tsv", [
      XNLI_DEV_HEADER, xnli_dev_row("en", "neutral", "He came", "He left", "1"),
      xnli_dev_row("zh", "contradiction", "他 来 了", "他 走 了", "1"),
      xnli_dev_row("de", "entailment", "Er kam", "Er ist da", "2"),
      xnli_dev_row("zh", "entailment", "天 很 蓝", "天 是 蓝 的", "2")])


def test_xnli_reads_the_original_files_and_language(tmp_path):
  write_xnli(tmp_path)
  processor = classifier_processors.get_processor("XNLI", str(tmp_path))
  assert processor.language == "zh" and processor.task.name == "XNLI"
  assert processor.get_labels() == ["contradiction", "entailment", "neutral"]
  assert processor.splits == ("train", "dev")
  assert processor.get_train_examples() == [
      InputExample("train-0", "他 来 了", "他 走 了", "contradiction"),
      InputExample("train-1", "天 很 蓝", "天 是 蓝 的", "entailment"),
      InputExample("train-2", "我 饿 了", "我 想 吃饭", "neutral")]
  assert processor.get_dev_examples() == [
      InputExample("dev-1", "他 来 了", "他 走 了", "contradiction"),
      InputExample("dev-2", "天 很 蓝", "天 是 蓝 的", "entailment")]
  assert processor.other_language_rows == {str(tmp_path / "xnli.dev.tsv"): 2}

  german = glue.GlueProcessor("xnli", tmp_path, language="de")
  assert german.split_file("train") == str(tmp_path / "multinli" / "multinli.train.de.tsv")
  assert [e.label for e in german.get_train_examples()] == ["contradiction"]
  assert [e.text_a for e in german.get_dev_examples()] == ["Er kam"]
  with pytest.raises(FileNotFoundError, match=r"multinli.train.fr.tsv'\] is in"):
    glue.GlueProcessor("XNLI", tmp_path, language="fr").get_train_examples()
  with pytest.raises(DataError, match="xnli.dev.tsv: no row has language 'fr' in column "
                     "'language'"):
    glue.GlueProcessor("XNLI", tmp_path, language="fr").get_dev_examples()
  with pytest.raises(ValueError, match="A language applies to XNLI only, not to GLUE MNLI"):
    glue.GlueProcessor("MNLI", tmp_path, language="zh")


def test_xnli_bad_rows_are_named(tmp_path):
  write_xnli(tmp_path)
  write(tmp_path / "multinli", "multinli.train.zh.tsv", [
      tsv("premise", "hypo", "label"), tsv("a", "b", "maybe")])
  with pytest.raises(DataError, match=r"multinli.train.zh.tsv:2: column 'label' is 'maybe', not "
                     "one of the XNLI labels"):
    glue.GlueProcessor("XNLI", tmp_path).get_train_examples()
  write(tmp_path, "xnli.dev.tsv", [tsv("gold_label", "sentence1", "sentence2"),
                                   tsv("neutral", "a", "b")])
  with pytest.raises(DataError, match=r"xnli.dev.tsv:1: the header lacks column\(s\) "
                     r"\['language'\]"):
    glue.GlueProcessor("XNLI", tmp_path).get_dev_examples()


# --- GLUE, on the real files beside the repository ---------------------------------------------

def test_real_cola_files():
  folder = shared_data("glue/CoLA")
  processor = glue.GlueProcessor("CoLA", folder)
  train, dev, test = (processor.get_examples(split) for split in ("train", "dev", "test"))
  assert (len(train), len(dev), len(test)) == (8551, 1043, 1063)
  assert dev[0] == InputExample("dev-0", "The sailors rode the breeze clear of the rocks.", None,
                                "1")
  assert test[0] == InputExample("test-0", "Bill whistled past the house.")
  assert {example.label for example in train} == {"0", "1"}
  assert set(processor.skipped_rows.values()) == {0}


def test_real_sst2_and_stsb_files():
  sst2 = glue.GlueProcessor("SST-2", shared_data("glue/SST-2"))
  dev = sst2.get_dev_examples()
  assert len(dev) == 872
  assert dev[1] == InputExample("dev-1", "unflinchingly bleak and desperate ", None, "0")
  stsb = glue.GlueProcessor("STS-B", shared_data("glue/STS-B"))
  train, test = stsb.get_train_examples(), stsb.get_test_examples()
  assert (len(train), len(test)) == (5749, 1379)
  assert train[1] == InputExample("train-1", "A man is playing a large flute.",
                                  "A man is playing a flute.", 3.8)
  assert all(0.0 <= example.label <= 5.0 for example in train)
  assert all(example.label is None for example in test)


def test_real_mrpc_files_with_byte_order_mark():
  processor = glue.GlueProcessor("MRPC", shared_data("glue/MRPC"))
  train, dev, test = (processor.get_examples(split) for split in ("train", "dev", "test"))
  assert (len(train), len(dev), len(test)) == (3668, 408, 1725)
  # The BOM would otherwise hide the `Quality` column; QUOTE_NONE keeps the unbalanced quote.
  assert dev[0].label == "1"
  assert dev[0].text_b == ('"The foodservice pie business does not fit our long-term growth '
                           "strategy.")
  assert test[0].guid == "test-0" and test[0].label is None


# --- The user's own files ----------------------------------------------------------------------

def test_custom_csv_with_quotes_and_line_breaks(tmp_path):
  write(tmp_path, "train.csv", ["review,stars",
                                '"Good, really good",5',
                                '"Two lines:',
                                'still one field",10',
                                "Bad,2",
                                "Meh,5"])
  write(tmp_path, "dev.csv", ["review,stars", "Fine,2"])
  processor = classifier_processors.get_processor("custom", tmp_path, text_a_column="review",
                                            label_column="stars")
  assert processor.get_train_examples() == [
      InputExample("train-0", "Good, really good", None, "5"),
      InputExample("train-1", "Two lines:\nstill one field", None, "10"),
      InputExample("train-2", "Bad", None, "2"),
      InputExample("train-3", "Meh", None, "5")]
  # Integer labels sort by value (2 < 5 < 10), not as strings ("10" < "2").
  assert processor.get_labels() == ["2", "5", "10"]
  assert processor.get_dev_examples() == [InputExample("dev-0", "Fine", None, "2")]


def test_custom_csv_line_numbers_count_multiline_rows(tmp_path):
  write(tmp_path, "train.csv", ["text,label", '"a\nb",x', "c,y,extra"])
  with pytest.raises(DataError, match="train.csv:4: expected 2 fields like the header, found 3"):
    custom_data.CustomProcessor(tmp_path, "text", "label").get_train_examples()


def test_custom_tsv_pairs_without_header(tmp_path):
  write(tmp_path, "train.tsv", [tsv("The cat sat.", 'A "cat" sat.', "yes"),
                                tsv("A dog ran.", "Nobody ran.", "no")])
  write(tmp_path, "test.tsv", [tsv("A cow.", "A cow mooed.")])
  processor = custom_data.CustomProcessor(tmp_path, text_a_column="0", text_b_column=1,
                                          label_column="2", has_header=False)
  assert processor.get_train_examples()[0] == InputExample("train-0", "The cat sat.",
                                                           'A "cat" sat.', "yes")
  assert processor.get_labels() == ["no", "yes"]
  assert processor.get_test_examples() == [InputExample("test-0", "A cow.", "A cow mooed.")]
  with pytest.raises(ValueError, match="columns are 0-based positions; got 'text'"):
    custom_data.CustomProcessor(tmp_path, "text", "2", has_header=False).get_train_examples()
  with pytest.raises(DataError, match="train.tsv:1: the row has 3 fields, so there is no label at "
                     "position 5"):
    custom_data.CustomProcessor(tmp_path, 0, 5, has_header=False).get_train_examples()


def test_custom_jsonl_pairs_regression_and_test_without_labels(tmp_path):
  write(tmp_path, "train.jsonl", ['{"q": "How old?", "a": "Ten.", "score": 0.5}', "",
                                  '{"q": "Where?", "a": "Here.", "score": "2"}'])
  write(tmp_path, "test.jsonl", ['{"q": "Why?", "a": "Because."}'])
  processor = custom_data.CustomProcessor(tmp_path, "q", "score", text_b_column="a",
                                          is_regression=True)
  assert processor.get_train_examples() == [
      InputExample("train-0", "How old?", "Ten.", 0.5),
      InputExample("train-1", "Where?", "Here.", 2.0)]
  assert processor.get_labels() == []
  assert processor.get_test_examples() == [InputExample("test-0", "Why?", "Because.")]


def test_custom_jsonl_labels_of_any_json_type(tmp_path):
  write(tmp_path, "train.jsonl", ['{"text": "spam spam", "spam": true}',
                                  '{"text": "hello", "spam": false}'])
  processor = custom_data.CustomProcessor(tmp_path, "text", "spam")
  assert processor.get_labels() == ["false", "true"]
  write(tmp_path, "dev.jsonl", ['{"text": "hi", "spam": null}'])
  with pytest.raises(DataError, match="dev.jsonl:1: key 'spam' must hold a string or a number"):
    processor.get_dev_examples()


def test_custom_bad_rows_are_reported_precisely(tmp_path):
  write(tmp_path, "train.csv", ["text,label", "good,pos", "bad,neg"])
  cases = [
      ("dev.csv", ["text,label", "fine,pos", "odd,neutral"],
       "dev.csv:3: label column 'label' is 'neutral', a label the training file does not have "
       "\\(training labels: \\['neg', 'pos'\\]\\)"),
      ("dev.csv", ["text,label", ",pos"], "dev.csv:2: column 'text' is empty"),
      ("dev.csv", ["text,label", "x,"], "dev.csv:2: label column 'label' is empty"),
      ("dev.csv", ["words,label", "x,pos"], "dev.csv:1: no column 'text' in the header"),
      ("dev.csv", [], "dev.csv: the file is empty"),
      ("dev.jsonl", ['{"text": "a", "label": "pos"}', '{"text": "a" "label"}'],
       "dev.jsonl:2: not valid JSON"),
      ("dev.jsonl", ['{"text": "a"}'], "dev.jsonl:1: missing key\\(s\\) \\['label'\\]"),
      ("dev.jsonl", ['{"text": 3, "label": "pos"}'], "dev.jsonl:1: key\\(s\\) \\['text'\\] must "
       "hold strings"),
      ("dev.jsonl", ["[1, 2]"], "dev.jsonl:1: expected a JSON object, got list"),
  ]
  for name, lines, message in cases:
    for old in tmp_path.glob("dev.*"):
      old.unlink()
    (tmp_path / name).write_text("\n".join(lines), encoding="utf-8")
    processor = custom_data.CustomProcessor(tmp_path, "text", "label")
    with pytest.raises(DataError, match=message):
      processor.get_dev_examples()


def test_custom_regression_score_errors_and_skipping(tmp_path, caplog):
  path = write(tmp_path, "train.tsv", ["text\tscore", "a\t1.5", "b\tabout 3", "c\tnan", "d\t2"])
  with pytest.raises(DataError,
                     match="train.tsv:3: label column 'score' is 'about 3', not a number"):
    custom_data.CustomProcessor(tmp_path, "text", "score", is_regression=True).get_train_examples()
  processor = custom_data.CustomProcessor(tmp_path, "text", "score", is_regression=True,
                                          skip_malformed_rows=True)
  with caplog.at_level(logging.WARNING):
    examples = processor.get_train_examples()
  assert [example.label for example in examples] == [1.5, 2.0]
  assert processor.skipped_rows == {str(path): 2}
  assert "Skipped 2 malformed row(s)" in caplog.text and "(lines 3, 4)" in caplog.text


def test_custom_file_discovery(tmp_path):
  with pytest.raises(FileNotFoundError, match="no train file in .* expected one of"):
    custom_data.CustomProcessor(tmp_path, "text", "label").get_train_examples()
  write(tmp_path, "train.csv", ["text,label", "a,b"])
  write(tmp_path, "train.jsonl", ['{"text": "a", "label": "b"}'])
  with pytest.raises(ValueError, match="more than one train file"):
    custom_data.CustomProcessor(tmp_path, "text", "label").get_train_examples()
  other = write(tmp_path, "my_train_data.tsv", ["text\tlabel", "x\ty"])
  processor = custom_data.CustomProcessor(tmp_path, "text", "label", files={"train": str(other)})
  assert processor.get_train_examples() == [InputExample("train-0", "x", None, "y")]


# --- TensorFlow Datasets, mocked offline ------------------------------------------------------

TFDS_CONFIGS = {
    # config: the processor's split names
    "cola": ("train", "dev", "test"), "sst2": ("train", "dev", "test"),
    "mrpc": ("train", "dev", "test"), "qqp": ("train", "dev", "test"),
    "stsb": ("train", "dev", "test"), "qnli": ("train", "dev", "test"),
    "rte": ("train", "dev", "test"), "wnli": ("train", "dev", "test"),
    "mnli": ("train", "dev", "test", "dev_matched", "dev_mismatched", "test_matched",
             "test_mismatched"),
    "ax": ("test",),
}
PAIRS = {"mrpc", "qqp", "stsb", "qnli", "rte", "wnli", "mnli", "ax"}


@pytest.fixture
def no_download_check(monkeypatch):
  """TFDS' `mock_data` replaces the download, but not the package's check, before it, that the
  download server can be reached (tested against a closed proxy in test_faults.py)."""
  monkeypatch.setattr(tfds_data, "_check_reachable", lambda tfds_name, builder: None)


def test_tfds_mock_data_for_every_glue_config(no_download_check):
  tfds = pytest.importorskip("tensorflow_datasets")
  # Offline there are no metadata files: MockPolicy.USE_CODE (what the default AUTO falls back to)
  # builds the features, label names included, from the code of TFDS's `glue` builder.
  with tfds.testing.mock_data(num_examples=4, policy=tfds.testing.MockPolicy.USE_CODE):
    for config, splits in TFDS_CONFIGS.items():
      processor = classifier_processors.get_processor("ignored", tfds_name=f"glue/{config}")
      assert processor.splits == splits
      task = glue.glue_task(processor.task.name)
      for split in splits:
        examples = processor.get_examples(split)
        assert len(examples) == 4
        for example in examples:
          assert example.guid.startswith(f"{split}-")
          assert isinstance(example.text_a, str) and example.text_a.strip()
          assert (example.text_b is not None) == (config in PAIRS)
          if task.is_regression:
            assert isinstance(example.label, float)
          else:
            assert example.label in task.labels
  sst2 = classifier_processors.get_processor(None, tfds_name="glue/sst2")
  assert [sst2.tfds_split(split) for split in sst2.splits] == ["train", "validation", "test"]


def test_tfds_labels_map_by_name_and_minus_one_is_unlabeled(no_download_check):
  tfds = pytest.importorskip("tensorflow_datasets")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  records = {
      "mnli": {"premise": ["P0", "P1", "P2"], "hypothesis": ["H0", "H1", "H2"],
               "label": [0, 2, -1], "idx": [7, 8, 9]},
      "wnli": {"sentence1": ["S0", "S1"], "sentence2": ["T0", "T1"], "label": [1, 0],
               "idx": [0, 1]},
      "stsb": {"sentence1": ["S0", "S1"], "sentence2": ["T0", "T1"], "label": [4.25, -1.0],
               "idx": [3, 4]},
  }
  requested = []

  def as_dataset(self, split, **unused_kwargs):
    requested.append(split)
    data = dict(records[self.builder_config.name])
    data["label"] = tf.constant(data["label"],
                                tf.float32 if self.builder_config.name == "stsb" else tf.int64)
    data["idx"] = tf.constant(data["idx"], tf.int32)
    return tf.data.Dataset.from_tensor_slices(data)

  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    mnli = classifier_processors.get_processor(None, tfds_name="glue/mnli")
    # TFDS orders MNLI classes entailment, neutral, contradiction; the GLUE files' labels come back.
    assert mnli.get_examples("dev_mismatched") == [
        InputExample("dev_mismatched-7", "P0", "H0", "entailment"),
        InputExample("dev_mismatched-8", "P1", "H1", "contradiction"),
        InputExample("dev_mismatched-9", "P2", "H2", None)]
    assert mnli.get_dev_examples()[0].guid == "dev-7"
    # WNLI: TFDS class 1 is `entailment`, which the GLUE files write as 1.
    wnli = classifier_processors.get_processor(None, tfds_name="glue/wnli")
    assert [example.label for example in wnli.get_train_examples()] == ["1", "0"]
    stsb = classifier_processors.get_processor(None, tfds_name="glue/stsb")
    assert [example.label for example in stsb.get_test_examples()] == [4.25, None]
  assert requested == ["validation_mismatched", "validation_matched", "train", "test"]


def test_tfds_rejects_unknown_datasets_and_empty_text(no_download_check):
  tfds = pytest.importorskip("tensorflow_datasets")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="Unsupported TFDS dataset 'imdb_reviews'"):
    classifier_processors.get_processor(None, tfds_name="imdb_reviews")

  def as_dataset(self, split, **unused_kwargs):
    del self, split
    return tf.data.Dataset.from_tensor_slices(
        {"sentence": ["fine", " "], "label": tf.constant([1, 0], tf.int64),
         "idx": tf.constant([0, 1], tf.int32)})

  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    with pytest.raises(DataError, match="TFDS glue/sst2 split 'train', idx 1: feature 'sentence' "
                       "is empty"):
      classifier_processors.get_processor(None, tfds_name="glue/sst2").get_train_examples()
