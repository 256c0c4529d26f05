"""The REST API's shapes (CONTRACT §5), a module per family: explicit In/Out schemas with Agno's
field names.

Out schemas read model instances (ninja Schema); In schemas are strict request bodies (Body).
"""
