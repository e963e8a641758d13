"""The library recipe scripts use inside a job (device, distributed init, data, loop, metrics,
checkpoints). Heavy imports (torch, transformers, deepspeed) happen inside its functions, never here."""
