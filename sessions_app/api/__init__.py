"""The REST API's door: routes, bearer and cookie auth, errors, schemas, pagination, SSE."""
