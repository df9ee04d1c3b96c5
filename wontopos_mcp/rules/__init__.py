"""Rules: the checks and shapes of names, text, dates and requests, as pure functions.

Owns: argument checks (``validation``), dates in and out (``dates``), speaker names and
store ids (``names``), sentence chunks and the duplicate key (``text``), what counts as a
restatement (``restatement``), a memory as every read returns it (``records``),
conversation messages in and context out (``conversation``), what a JSON value a caller
sent may hold, for every face that decodes one (``json_values``), idempotency keys
(``idempotency``), the items of a batch or a text blob (``batch_items``), the context
budget (``budget``), the names a question mentions (``query_names``), where a database
lives (``locations``), secret redaction (``redaction`` with ``secret_matching``,
``secret_shapes``, ``secret_words``) and the shape of every answer the engine gives
(``answers``: ``TypedDict``s, the one place the faces' answer schemas come from).

May import: ``errors`` and other rules only. No I/O, no storage, no model: every
function here is tested with plain values.
"""
