"""The MCP adapter: the bridge served to MCP clients over stdio or Streamable HTTP.

``server`` turns the catalogue of ``bridge/`` into the SDK's low-level ``Server``; ``stdio`` and
``http`` are its transports, ``jsonrpc`` answers what is not a JSON-RPC message on either, and
``audit`` journals every call to a ``korg-ledger@v1`` file. Who may reach the HTTP server, and as
whom, is ``auth/``. Nothing in ``recall/`` imports this package: korg-recall is a binary like any
other.
"""
