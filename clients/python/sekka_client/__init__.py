"""sekka's Python client (docs/clients.md)."""

from .client import AuthError, Client, ClosedError, NoServerError, SekkaError

__all__ = ["Client", "SekkaError", "AuthError", "NoServerError", "ClosedError"]
__version__ = "0.1.0"
