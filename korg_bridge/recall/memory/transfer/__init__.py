"""``export`` and ``import``: the store written out losslessly, and memories brought in.

``export`` writes JSONL or a Markdown tree; ``formats`` recognises what an import was given,
``verbatim`` reads our own export back field by field, ``foreign``, ``dedupe`` and ``staging`` plan
foreign memories through the write policy, and ``importer`` writes all of it or nothing.
"""
