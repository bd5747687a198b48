"""m3agent: long-term multimodal memory for agents that watch and listen.

Importing this package loads no model, reads no configuration and opens no
socket; every heavy dependency is imported inside the backend that needs it.
"""

__version__ = "0.1.0"
