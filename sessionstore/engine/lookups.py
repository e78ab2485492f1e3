"""The embedded engine does once what moto redid within a request, or for each request alike.

Layer: inside the embedded engine (``cache.install`` installs it), under moto's DynamoDB. Why:
small costs, paid by every request, more of them the more actions it carries:

* moto's handler looked its backend up (by account, then region, through ``BackendDict``) each
  time an action read ``self.dynamodb_backend`` -- several times a request, once more per action
  of a transaction. A handler serves one request, of one account and region: once per handler.
* moto's backend rewrote each update expression's text with a regular expression on every
  ``update_item`` (spaces around ``=``, ``+``, ``-`` taken out) only to test the result for being
  empty: once per text (bounded, as ``cache``'s caches are).
"""

from __future__ import annotations

import functools
import re
from types import SimpleNamespace
from typing import Any


def install(texts: int) -> None:
    """Patch moto's DynamoDB in this process (once: ``cache.install``); ``texts``: how many
    rewritten texts are kept."""
    _backend_once_per_handler()
    _update_texts_rewritten_once(texts)


def _backend_once_per_handler() -> None:
    from moto.dynamodb.responses import DynamoHandler

    handler: Any = DynamoHandler
    look_up = handler.dynamodb_backend.fget

    def dynamodb_backend(self: Any) -> Any:
        found = self.__dict__.get("sessionstore_backend")
        if found is None:
            found = self.__dict__["sessionstore_backend"] = look_up(self)
        return found

    handler.dynamodb_backend = property(dynamodb_backend, doc=handler.dynamodb_backend.__doc__)


def _update_texts_rewritten_once(texts: int) -> None:
    from moto.dynamodb import models

    rewritten = functools.lru_cache(maxsize=texts)(re.sub)

    def sub(pattern: Any, repl: Any, string: Any, count: int = 0, flags: Any = 0) -> Any:
        if count or flags or not all(type(a) is str for a in (pattern, repl, string)):
            return re.sub(pattern, repl, string, count=count, flags=flags)
        return rewritten(pattern, repl, string)  # moto's only use: the update text, per request

    backend_module: Any = models
    backend_module.re = SimpleNamespace(**{**vars(re), "sub": sub})
