"""What every part of the package leans on: user errors, file systems, the model-kind registry.

- `errors`: `UserError`, the base of the errors that are the user's to fix.
- `tfrecord_errors`: TFRecord read errors that name the file.
- `file_io`: every read and write through `tf.io.gfile` (local, `gs://`, ...), atomic writes.
- `registry`: the model kinds a model folder can hold, declared by the model classes.
- `lazy_exports`: a package's public names, imported on first use.
"""
