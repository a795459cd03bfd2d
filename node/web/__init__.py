"""The read-only web view (docs/web.md): server-rendered pages of what one token can read,
signed in with a memlane bearer token kept in an ``HttpOnly``, ``SameSite=Strict`` cookie.
``app`` is the ASGI application (routes, the security headers); ``session`` reads the sign-in
form and the cookie; ``pages`` renders each page from the answers of the tool layer, so the
read rule is the tools' own.
"""
