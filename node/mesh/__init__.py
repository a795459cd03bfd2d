"""The mesh at work (docs/mesh.md): sync over mutual TLS, joining, discovery.

``sync`` (the listener and dialled peers), ``link`` (one connection's loop over
``protocol.session``), ``host`` (its options and what a node's links share), ``outbox`` (what a
link sends), ``errors`` (how a link ends abnormally), ``proofs`` (the fork proofs a link
carries), ``rounds`` (when a link's rounds are due), ``peers`` (the peer table), ``service``
(sync as ``memlane serve`` runs it: certificates, renewal, the peer snapshot, discovery),
``discovery`` (zeroconf), ``join`` (joining by invite).  Membership, certificates and invites
are ``node.members``; what sync reads and writes of the store is ``node.replica``.
docs/mesh.md and docs/operations.md describe them.
"""
