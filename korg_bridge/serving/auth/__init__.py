"""Who may reach the HTTP bridge, how often, and as whom.

The outer ASGI gate (``gate``: bearer token, rate limit, the request's identity), the token file
(``tokens``), the caller passed to each tool process (``identity``), per-token limits
(``ratelimit``), connection admission (``admission``) and where the server listens and which
Host/Origin it accepts (``binding``). Kept apart from the server so every refusal happens before
the SDK sees a request.
"""
