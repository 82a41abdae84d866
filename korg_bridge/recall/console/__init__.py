"""``korg-recall serve``: a web console, a REST API, live updates and metrics over the memory store
and the history index, in one process (see ``docs/console.md``).

:mod:`.services` is the layer every route calls; :mod:`.app` builds the Starlette app;
:mod:`.serve` is the command.
"""
