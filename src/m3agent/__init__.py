"""m3agent: long-term multimodal memory for agents that watch and listen.

Importing this package loads no model, reads no configuration and opens no
socket; every heavy dependency is imported inside the backend that needs it.

The Python API is :func:`open`, which returns a :class:`Memory`::

    import m3agent

    with m3agent.open("mem.db") as memory:
        memory.ingest("interview.mp4")
        print(memory.ask("What did the man in the white T-shirt say?").text)
"""

from m3agent.api import Memory, open

__version__ = "0.1.0"

__all__ = ["Memory", "__version__", "open"]
