"""Lambda entry points of this repo's SAM application (``template.yaml``): one line each,
importing the packaged handlers (``durable.handlers``), as a project made by
``durable init`` has them.
"""
