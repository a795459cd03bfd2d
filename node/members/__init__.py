"""Who belongs to the mesh (docs/mesh.md): membership from the authority's log, certificates and
TLS, invites.

``membership`` (who may write what; the receive path's admission rule), ``certs`` (the
authority's CA, node certificates, TLS 1.3 contexts and the peer check), ``invites`` (signed,
expiring, single-use invites and the authority's side of redeeming them), ``authority`` (the
authority node's membership changes and certificate renewals), ``errors``.  The node stands on
it; the mesh's serving side (``node.mesh``) uses it.  docs/mesh.md describes them.
"""
