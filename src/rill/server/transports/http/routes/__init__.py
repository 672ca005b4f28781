"""The routes of the HTTP API, one module per resource family (wire §8.4)."""

from rill.server.transports.http.routes import cluster, consumers, follow, messages, streams, system, users

# public routers first; "/users/logout" comes before "/users/{user_id}" inside users.router
ROUTERS = (
    system.public, users.public, system.router, users.router, users.tokens, streams.router,
    streams.topics, messages.router, messages.groups, follow.router,
    consumers.router, cluster.router,
)
