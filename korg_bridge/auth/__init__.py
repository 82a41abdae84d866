"""Who may call an HTTP server of ours, and how often: bearer tokens with their tenants and actors,
rate limits, admission of connections, where we listen and which Host/Origin we accept.

Shared by the MCP bridge's HTTP transport (:mod:`korg_bridge.serving.http`) and korg-recall's
console (``korg-recall serve``), so both refuse the same requests the same way.
"""
