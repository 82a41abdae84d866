"""The introspect contract and everything about one call, with no MCP server in sight.

From a binary's ``--introspect`` document (``contract``, ``discovery``) to the tool catalogue
(``catalogue``, ``toolnames``, ``drift``) and one call start to finish: the side-effect gate
(``policy``), coercion, validation and advice, argv, the process and its reaper, output, results
and progress (``invocation`` drives them). ``serving/`` puts this behind MCP; keeping the server
out (no ``mcp.server`` import here) keeps the contract testable and usable as a library.
"""
