"""The embedded engine's patches to moto, each keeping one of DynamoDB's promises.

Layer: under ``sessionstore.local`` (``LocalDynamoDB`` installs them) and ``client.connect``
(``transport``); nothing of the store imports them. Why a package of their own: they are how the
embedded DynamoDB answers, sizes and errors as DynamoDB does, and how it stays fast -- not the
store's patterns, so they are bounded and read apart from them. ``checks`` refuses a malformed
request with DynamoDB's 400, ``keys`` checks keys first (both raise ``refusals``' 400),
``tokens`` keeps ``ClientRequestToken``, ``cache`` parses each expression text once,
``parsing`` reads a request's JSON with readers made once per action, ``transactions``
evaluates a transaction's conditions once, ``lookups`` does moto's per-request look-ups once,
``updates`` evaluates an update in one pass, ``backup`` backs up only what an update can change,
``results`` writes results to JSON, and ``transport`` skips HTTP in the engine's own process.
"""
