"""Memory writers (clip -> memories): perception-only, a small local LLM, or a multimodal endpoint, with
the messages and statements of a model call."""
