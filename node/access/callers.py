"""Callers and what they may do (docs/authority.md).

A caller is the principal a bearer token names, in one workspace, with scopes.
``admin:workspace`` includes write and read; ``write:workspace`` includes nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.errors import Forbidden

__all__ = ["SCOPES", "Caller"]

SCOPES = ("read:workspace", "write:workspace", "admin:workspace")
_IMPLIED = {
    "read:workspace": {"read:workspace", "admin:workspace"},
    "write:workspace": {"write:workspace", "admin:workspace"},
    "admin:workspace": {"admin:workspace"},
}


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    workspace: str
    scopes: frozenset[str]
    token_id: str
    expires: int | None = None

    def has(self, scope: str) -> bool:
        return bool(self.scopes & _IMPLIED[scope])

    @property
    def is_admin(self) -> bool:
        return "admin:workspace" in self.scopes

    def require(self, scope: str) -> None:
        if not self.has(scope):
            raise Forbidden(f"this call needs the {scope} scope on workspace {self.workspace}")

    def may_manage(self, owner: str, workspace: str) -> bool:
        """Owner-or-admin actions (adjust, delete, undelete, forget, amend)."""
        return workspace == self.workspace and (owner == self.principal or self.is_admin)

    def may_read_private_fields(self, owner: str) -> bool:
        return owner == self.principal or self.is_admin
