"""The HTTP API: route logic (``service``), Powertools routes, models and OpenAPI.

Imported only by the API handler; nothing here is needed to run workflows.
"""
