"""The entity graph as reasoning sees it: typed operators over people, their appearances, moments and shots.

Control, the REST API and the MCP server share :class:`~m3agent.graph.operators.EntityGraph`; its answers are the
frozen values of :mod:`m3agent.graph.values`.
"""
