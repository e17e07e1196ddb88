"""``data=csv``: a table in CSV files, its column types inferred, streamed from files (``trainer.data.files``)."""

from trainer.data.sources import StreamedFiles

SOURCE = StreamedFiles("csv")
