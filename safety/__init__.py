"""Safe defaults every process loads through settings and the ASGI entry point: the generated
secret key, cookies kept Secure except on loopback, request bodies refused past the limit before
they are read, and secrets masked in error reports and in text others will read."""
