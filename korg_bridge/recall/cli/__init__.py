"""The korg-recall binary: its commands, declared once through the toolkit, and what a terminal sees.

``app`` is the entry point and the history commands; ``memory``, ``transfer`` and ``hooks`` declare
the rest; ``schemas`` holds the longer input schemas; ``terminal`` renders answers for a person.
The top of korg-recall: nothing else in ``recall/`` should import it.
"""
