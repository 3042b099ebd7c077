"""The GraphQL endpoint: schema, resolvers, limits and the GraphQL-over-HTTP view."""
