"""The LoCoMo benchmark: its data, ingest as memories, retrieval recall, QA, and its report section."""
