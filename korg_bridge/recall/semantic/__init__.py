"""Embeddings for recall: the model, the stored vectors, semantic and hybrid ranking.

``model`` says which model is meant and whether it is on disk without importing anything heavy;
``embed``, ``encoder`` and ``windows`` load and run it (onnxruntime, local files only); ``embedtext``
and ``embedpass`` decide what is embedded and fill the ``vectors`` store; ``rank`` and ``modes``
rank with them; ``indexer`` is the detached background process that fills missing vectors.
Everything heavy is imported only when a model is used: korg-recall is a fresh process per call.
"""
