"""Retrieval for control: the search tools over a store, hybrid ranking, reranking without a model, the
query's reading, and search results rendered as the text a model reads and cited as evidence."""
