"""Training the control policy: reinforcement learning of the agent loop over the real memory.

:mod:`.episodes` (LoCoMo questions over their conversation's memories, split by conversation),
:mod:`.reward` (answer F1 + evidence overlap − format errors − leaked ids), :mod:`.rollout` (the agent
loop's prompts, schema and search, played by a transformers policy), :mod:`.trainer` (TRL's GRPO with PEFT
LoRA), :mod:`.export` (the merged model as a GGUF the llama.cpp runtime runs, with its card) and
:mod:`.catalogue` (trained models beside the packaged ones). Importing this package loads nothing: torch,
transformers, TRL and PEFT (the ``train`` extra) are imported by the functions that need them.
"""
