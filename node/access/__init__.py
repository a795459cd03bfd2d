"""Who may do what (docs/authority.md): ``callers`` (a caller — a principal in a workspace
with scopes — and what its scopes allow) and ``tokens`` (the bearer tokens that name callers:
minted, checked, listed, revoked, and the ``tokens`` table they are kept in).  The mesh's
authority node — who belongs to the mesh — is ``node.members``.
"""
