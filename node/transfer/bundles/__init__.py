"""Bundles on disk: export, frontier files and import (docs/bundles.md).

The format is ``protocol.bundle``'s; this package reads the store and the file: ``files.py``
(the files, frontier files, ``BundleError``), ``export.py``, ``reading.py`` (an import's
verifying pass) and ``importing.py`` (its chunked apply).
"""

from node.transfer.bundles.export import ExportReport, export_bundle
from node.transfer.bundles.files import BundleError, read_frontier, write_frontier
from node.transfer.bundles.importing import IMPORT_CHUNK, IMPORT_PAUSE, ImportReport, import_bundle

__all__ = [
    "IMPORT_CHUNK",
    "IMPORT_PAUSE",
    "BundleError",
    "ExportReport",
    "ImportReport",
    "export_bundle",
    "import_bundle",
    "read_frontier",
    "write_frontier",
]
