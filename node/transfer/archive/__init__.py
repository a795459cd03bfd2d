"""The archive: a backup of a whole node, and restoring one (docs/operations.md §Backups).

``create_archive`` copies the store with SQLite's online backup API (a consistent snapshot
while the node runs and writes), takes the tokens out of the copy, and writes one gzipped tar:

- ``manifest.json``: what the archive holds, each file's SHA-256 and size, the key-derivation
  parameters and the cipher's nonce;
- ``memlane.db`` (without its tokens) and the data directory's plain files (configuration,
  certificates) as they were;
- ``secrets.enc``: the node key, the authority key if the node holds it, and every token row
  (hashes only: tokens are never stored in clear), encrypted with AES-256-GCM under a key
  derived from the passphrase with Scrypt (memory-hard), the manifest as associated data — so
  a changed manifest, like a wrong passphrase, opens nothing.

``restore_archive`` verifies every file against the manifest and decrypts the secrets before
it writes anything, builds the node in a directory beside ``--data`` and moves it into place.
The restored node writes no audit event; it starts a new random epoch whose seq 1 links to the
last head of the epoch it continues (docs/entries.md §The header: a restore never reuses a
position its peers may hold), does the same for the authority's log when it holds the authority
key, gets a new audit ``feed_id``, and revokes the tokens it brought back unless asked to keep
them.
"""

from node.transfer.archive.create import ArchiveReport, create_archive
from node.transfer.archive.manifest import PLAIN_FILES, ArchiveError, Kdf, WrongPassphrase
from node.transfer.archive.restore import RestoreReport, restore_archive
from node.transfer.archive.secrets import read_passphrase

__all__ = [
    "PLAIN_FILES",
    "ArchiveError",
    "ArchiveReport",
    "Kdf",
    "RestoreReport",
    "WrongPassphrase",
    "create_archive",
    "read_passphrase",
    "restore_archive",
]
