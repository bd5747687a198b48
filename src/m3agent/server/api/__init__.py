"""The REST API's routers (``/api/...`` and ``/docs``) and their request and response bodies."""
