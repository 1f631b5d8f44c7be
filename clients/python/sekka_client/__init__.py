"""sekka's Python client (docs/clients.md)."""

from .client import AuthError, Client, NoServerError, SekkaError

__all__ = ["Client", "SekkaError", "AuthError", "NoServerError"]
__version__ = "0.1.0"
