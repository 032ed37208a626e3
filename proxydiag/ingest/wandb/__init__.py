"""wandb."""
