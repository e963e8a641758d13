"""Inside the ranks: what recipe scripts use — device and distributed init, assets from the store,
data, model build, the torch/DeepSpeed engines, the training loop, metrics, checkpoints, trackers.
Heavy imports (torch, transformers, deepspeed) happen inside functions, never at import.

May import: runtime.node, assets (finding a staged asset in the store), state, config, core, errors."""
