"""``data=tfrecord``: ``tf.train.Example`` records in TFRecord files (plain, GZIP or ZLIB), streamed from
files (``trainer.data.files``)."""

from trainer.data.sources import StreamedFiles

SOURCE = StreamedFiles("tfrecord")
