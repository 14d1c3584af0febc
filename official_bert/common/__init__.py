"""What every part of the package leans on: user errors, file systems, the model-kind registry.

- `errors`: `UserError`, the base of the errors that are the user's to fix.
- `tfrecord_errors`: TFRecord read errors that name the file.
- `file_io`: every read and write through `tf.io.gfile` (local, `gs://`, ...), atomic writes.
- `registry`: the model kinds a model folder can hold, declared by the model classes.
- `paths`: where a run reads and writes, checked before any work.
- `debris`: what killed writers leave behind, removed by the next run.
- `lazy_exports`: a package's public names, imported on first use.
- `cpuinfo`: the CPU's /proc/cpuinfo flags and vendor, read without TensorFlow.
"""
