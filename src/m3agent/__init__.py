"""m3agent: long-term multimodal memory for agents that watch and listen.

Importing this package loads no model, reads no configuration and opens no
socket; every heavy dependency is imported inside the backend that needs it.

The Python API is :func:`open`, which returns an :class:`Agent`::

    import m3agent

    with m3agent.open("mem.db") as agent:
        agent.ingest("interview.mp4")
        print(agent.ask("What did the man in the white T-shirt say?").text)
"""

from m3agent.api import Agent, open

__version__ = "0.1.0"

__all__ = ["Agent", "__version__", "open"]
