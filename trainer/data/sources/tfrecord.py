"""``data=tfrecord``: ``tf.train.Example`` records in TFRecord files (plain, GZIP or ZLIB), streamed from files (``trainer.data.files``)."""

from trainer.data.files import FileSource, load_files
from trainer.data.sources import Source, given
from trainer.errors import ConfigError


class TFRecordSource(Source):
    read_ahead = False  # its records are checked with TensorFlow's protobufs: a second thread importing
    # TensorFlow during the main thread's import is a module-lock deadlock

    def check(self, data_cfg) -> None:
        # "???" in a data yaml does not survive the merge onto the schema's defaults: unset reads None.
        for key in ("train_files", "eval_files", "label_key"):
            if not given(data_cfg, key):
                raise ConfigError(f"data.{key} is not set; data=tfrecord needs data.train_files, data.eval_files "
                                  "(files or globs) and data.label_key")
        super().check(data_cfg)

    def load(self, data_cfg) -> FileSource:
        for key in ("train_examples", "test_examples", "validation_examples"):
            if data_cfg.get(key):
                raise ConfigError(f"data.{key}: not for data=tfrecord (streamed files); list the files to read in "
                                  "data.train_files and data.eval_files")
        return load_files(data_cfg)


SOURCE = TFRecordSource()
