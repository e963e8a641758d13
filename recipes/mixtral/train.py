"""placeholder: the training script arrives with the recipes issue."""
