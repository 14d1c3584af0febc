"""Pre-training BERT: from text files to masked-LM / next-sentence records, and training on them.

Writing the data (`create_pretraining_data.py`), one way through the modules:

* `corpus`: text files (one sentence a line, a blank line between documents) -> shards of whole
  documents;
* `instances`: documents of WordPiece ids -> `[CLS] A [SEP] B [SEP]` pairs, the original tool's
  algorithm on numpy arrays, masked by `masking` (the original's 80/10/10 rule, in numpy);
* `writer`: tokenizes a shard, builds its instances and writes them as `tf.train.Example` pieces;
  `workers` shares the shards between processes; `pipeline` (`create_pretraining_data`) drives
  them, and `shuffle` puts the records of all shards in one random order, in bounded memory, as
  it writes the output TFRecords; `stats` counts what was read and written;
* `shuffle_records` (its function `shuffle_records`): the same shuffle for record files written
  in another order;
* `beam_pipeline` (`create_pretraining_data_beam`): the same records from an Apache Beam pipeline
  (Dataflow, Flink, Spark, the DirectRunner), with the `beam` extra installed.

Training on the data (`run_pretraining.py`):

* `reader` (`pretraining_dataset`): the records, ours or the original tool's -> batches of the
  model's inputs and labels, optionally re-masked every epoch by `dynamic_masking`
  (`DynamicMasking`, the same rule in TensorFlow, inside `tf.data`);
* the pre-training task itself, `BertPretrainer` on the shared engine, is one of the tasks:
  `official_bert.tasks.pretraining.PretrainingTask`.

Names are imported on first use (PEP 562): importing one module of this package (as each worker
process of `create_pretraining_data` does) does not import the others.

Example:

>>> from official_bert import pretraining
>>> pretraining.InstanceOptions(max_seq_length=64).max_seq_length
64
"""

from official_bert.common.lazy_exports import lazy_exports

_EXPORTS = {
    "create_pretraining_data": ".pipeline",
    "DEFAULT_SHARD_BYTES": ".pipeline",
    "create_pretraining_data_beam": ".beam_pipeline",
    "InstanceOptions": ".instances",
    "PretrainingStats": ".stats",
    "pretraining_dataset": ".reader",
    "DynamicMasking": ".dynamic_masking",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
