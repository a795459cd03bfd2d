"""What leaves or enters a node whole, and what checks it (docs/bundles.md, docs/operations.md
§Backups).

``bundles`` (bundle export, frontier files, and import through the store's receive path, a
chunk of entries a transaction), ``archive`` (the online backup, secrets under a passphrase,
and restore into a new epoch), ``verify`` (``memlane log verify``: every chain, signature and
payload hash re-checked).  Nothing is imported here: the node loads ``bundles`` and
``archive`` only when one is used.
"""
